"""LocalSlack with what only tests ask of it: failures on demand, a person's Home view, the
events and envelopes of a message built without sending them, the workspace as JSON.

The product's LocalSlack carries only what the bot, the playground page and the benchmark use;
tests build `TestSlack`.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from aiohttp import web

from bot.playground import LocalSlack

# LocalSlack's record types and its payload builders: the library's users meet the records only
# through LocalSlack's attributes and never build a payload by hand, so they stay private; tests
# annotate with the records and build (and forge) payloads without sending them.
from bot.playground._payloads import (
    event_callback,
    home_block_actions,
    message_events,
    payload_user,
)
from bot.playground._slack import ApiCall, ChangeKind, Ephemeral, Message, OpenedView

# The Web API LocalSlack serves, and how it reads a call's arguments: failures on demand are
# answered in front of it.
from bot.playground._webapi import WebApi, _read_args

__all__ = [
    "ApiCall",
    "ChangeKind",
    "Ephemeral",
    "Message",
    "OpenedView",
    "TestSlack",
    "home_block_actions",
    "payload_user",
]


class _FailingWebApi(WebApi):
    """LocalSlack's Web API, answering the calls a test chose with a failure (an HTTP status
    and a `Retry-After` header), as Slack does when it rate limits or falls over."""

    def __init__(self, workspace: LocalSlack) -> None:
        super().__init__(workspace, socket_url=workspace._socket_url)
        self.failures: dict[str, list[tuple[int, int]]] = {}

    async def handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        queued = self.failures.get(method)
        if not queued:
            return await super().handle(request)
        try:
            args = await _read_args(request)
        except (ValueError, RecursionError):  # not JSON: the API answers that first
            return await super().handle(request)
        args.pop("token", None)
        status, retry_after = queued.pop(0)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None
        call = ApiCall(method=method, args=args, at=time.time(), status=status, peer_port=peer_port)
        self.workspace.calls.append(call)
        await self.workspace.publish("rate_limited", {"method": method, "status": status})
        return web.json_response(
            {"ok": False, "error": "ratelimited"},
            status=status,
            headers={"Retry-After": str(retry_after)},
        )


class TestSlack(LocalSlack):
    """LocalSlack plus the helpers tests drive it with."""

    __test__ = False
    """A class, not a test case: pytest collects classes named `Test*` in test modules."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self._api = self._failing = _FailingWebApi(self)

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 0) -> None:
        """Answer the next call to `method` with `status` and a `Retry-After` header."""
        self._failing.failures.setdefault(method, []).append((status, retry_after))

    def home_view(self, user: str) -> dict[str, Any] | None:
        """The App Home view the app last published for `user`."""
        return self.home_views.get(user)

    def events_for(self, message: Message) -> list[dict[str, Any]]:
        """The events Slack sends an app subscribed to `app_mention`, `message.channels` and
        `message.im` for a person's message (what `post_user_message` delivers)."""
        return message_events(self, message)

    def event_envelope(
        self, event: dict[str, Any], *, event_id: str | None = None
    ) -> dict[str, Any]:
        """An `event_callback` envelope around `event`, as the Events API delivers it."""
        return event_callback(self, event, event_id=event_id)

    def response_url(self, channel: str, user: str) -> str:
        """A new `response_url` for what `user` did in `channel`, as a command or click brings."""
        return self._responses.issue(channel, user)

    def snapshot(self) -> dict[str, Any]:
        """The whole workspace as JSON."""
        return {
            "bot_user_id": self.bot_user_id,
            "users": [asdict(u) for u in self.users.values()],
            "usergroups": self.usergroups,
            "channels": [asdict(c) for c in self.channels.values()],
            "messages": [{"channel": m.channel, **m.to_api()} for m in self.messages],
            "ephemerals": [asdict(e) for e in self.ephemerals],
            "views": [asdict(v) for v in self.views.values() if not v.closed],
            "home_views": self.home_views,
            "seq": self.last_seq,
        }
