"""LocalSlack with what only tests ask of it: failures on demand, a person's Home view, the
events and envelopes of a message built without sending them, the workspace as JSON.

The product's LocalSlack carries only what the bot, the playground page and the benchmark use;
tests build `TestSlack`.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

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


class TestSlack(LocalSlack):
    """LocalSlack plus the helpers tests drive it with."""

    __test__ = False
    """A class, not a test case: pytest collects classes named `Test*` in test modules."""

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 0) -> None:
        """Answer the next call to `method` with `status` and a `Retry-After` header."""
        self._api.fail_next(method, status=status, retry_after=retry_after)

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
