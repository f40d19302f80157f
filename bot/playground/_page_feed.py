"""The playground page's live updates: the workspace's change feed as server-sent events, one
`change` event per change the page can see, a ping while there is none."""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import web

from ._changes import Change, ChangeFeed

__all__ = ["stream_changes"]

_QUIET_CHANGES = frozenset({"call", "rate_limited"})
"""Changes the page cannot see; every Web API call is one, so they would only cost refreshes."""
_HEARTBEAT_SECONDS = 15.0


async def stream_changes(
    request: web.Request, feed: ChangeFeed, shutdown: asyncio.Event
) -> web.StreamResponse:
    """Stream `feed`'s changes to the page until it goes or `shutdown` is set."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    queue = feed.subscribe()
    closing = asyncio.ensure_future(shutdown.wait())
    try:
        await response.write(b"retry: 1000\n\n")
        while not shutdown.is_set():
            getting = asyncio.ensure_future(queue.get())
            done, _ = await asyncio.wait(
                {getting, closing},
                timeout=_HEARTBEAT_SECONDS,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getting not in done:
                getting.cancel()
                if not done:
                    await response.write(b": ping\n\n")
                continue
            change: Change = getting.result()
            if change.kind in _QUIET_CHANGES:
                continue
            data = json.dumps({"seq": change.seq, "kind": change.kind})
            await response.write(f"event: change\ndata: {data}\n\n".encode())
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        closing.cancel()
        feed.unsubscribe(queue)
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        await response.write_eof()
    return response
