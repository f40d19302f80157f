"""A store says how many of this process's calls wait for their turn (a pooled connection on
Redis, the database thread on SQLite): the inbox worker takes no new work while its own work
keeps some waiting, so the app's inbox writes are not queued behind it."""

from __future__ import annotations

import asyncio

from state import Store, open_store


async def test_calls_past_what_the_store_serves_at_once_show_as_waiting(store_url: str) -> None:
    if store_url.startswith("sqlite"):
        url, at_once = store_url, 1  # one database thread
    else:
        sep = "&" if "?" in store_url else "?"
        url, at_once = f"{store_url}{sep}pool_size=2", 2
    async with open_store(url) as store:
        assert store.calls_waiting == 0
        calls = [asyncio.ensure_future(store.inbox_size()) for _ in range(5)]
        await asyncio.sleep(0)  # each call has started: in flight, or waiting for its turn
        assert store.calls_waiting == 5 - at_once
        assert await asyncio.gather(*calls) == [0] * 5
        assert store.calls_waiting == 0


async def test_inbox_writes_until_their_group_commit_ends_show_as_waiting(
    store: Store,
) -> None:
    """A burst's acks wait for their inbox writes: the worker must see those as a queue too."""
    writes = [asyncio.ensure_future(store.enqueue("event", {"n": n})) for n in range(5)]
    await asyncio.sleep(0)  # each write joined the group commit; its writer has not run yet
    assert store.calls_waiting == 5
    # One turn later the writer took all five as one batch; a write needs I/O, so none can have
    # finished: the batch under way counts until it ends (no timing: turns, not seconds).
    await asyncio.sleep(0)
    assert not any(write.done() for write in writes)
    assert store.calls_waiting == 5
    assert all(await asyncio.gather(*writes))
    assert store.calls_waiting == 0
