"""The playground's Slack workspace: LocalSlack plus what a person at the page can also do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ._interactive import view_closed
from ._slack import LocalSlack

__all__ = ["DEMO_PEOPLE", "Person", "PlaygroundSlack"]


@dataclass(kw_only=True, frozen=True)
class Person:
    """Someone the page lets you act as."""

    id: str
    name: str
    role: str = ""
    """Shown next to the name in the person picker (e.g. "approver")."""


DEMO_PEOPLE: tuple[Person, ...] = (
    Person(id="U0ALICE", name="alice", role="requester"),
    Person(id="U0BOB", name="bob", role="approver"),
    Person(id="U0CAROL", name="carol", role="approver"),
    Person(id="U0DAVE", name="dave", role="not an approver"),
)
"""LocalSlack's demo people; bob and carol are the playground's configured approvers."""


class PlaygroundSlack(LocalSlack):
    """LocalSlack with the one thing a person at the page does that tests never needed:
    closing a modal without submitting it (Slack then sends `view_closed` if asked to)."""

    async def close_view(self, user: str, view_id: str) -> None:
        opened = self.open_view(user, view_id)
        opened.closed = True
        if opened.view.get("notify_on_close"):
            await self.send_interactivity(view_closed(self, user, opened))
        await self.publish("view_updated", asdict(opened))

    def latest_statuses(self) -> list[dict[str, str]]:
        """The agent session status of each thread that has one."""
        return [
            {"channel": s.channel, "thread_ts": s.thread_ts, "status": s.status, "title": s.title}
            for s in self.sessions.values()
        ]

    def page_messages(self, viewer: str) -> list[dict[str, Any]]:
        """Channel messages and the viewer's ephemerals, oldest first, as the page shows them."""
        shown: list[dict[str, Any]] = []
        for message in self.messages:
            shown.append(
                {
                    "channel": message.channel,
                    "ts": message.ts,
                    "thread_ts": message.thread_ts,
                    "user": message.user,
                    "text": message.text,
                    "blocks": message.blocks,
                    "reactions": [
                        {"name": name, "users": users} for name, users in message.reactions.items()
                    ],
                    "edited": message.edited,
                    "chunks": message.chunks,
                    "streaming": message.streaming,
                }
            )
        for ephemeral in self.ephemerals_for(viewer):
            shown.append(
                {
                    "channel": ephemeral.channel,
                    "ts": ephemeral.message_ts,
                    "thread_ts": ephemeral.thread_ts,
                    "user": self.bot_user_id,
                    "text": ephemeral.text,
                    "blocks": ephemeral.blocks,
                    "reactions": [],
                    "edited": False,
                    "ephemeral_to": ephemeral.user,
                }
            )
        shown.sort(key=lambda m: float(m["ts"]))
        return shown
