"""LocalSlack's change feed: every change to the workspace in order, for `wait_for` and the
playground page's live updates."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

__all__ = ["Change", "ChangeFeed", "ChangeKind"]

T = TypeVar("T")

ChangeKind = Literal[
    "message",
    "message_updated",
    "message_deleted",
    "ephemeral",
    "view_opened",
    "view_updated",
    "home_published",
    "reaction_added",
    "reaction_removed",
    "status",
    "call",
    "rate_limited",
]


@dataclass(kw_only=True)
class Change:
    """One change to the workspace, for `wait_for` and the playground's live feed."""

    seq: int
    kind: ChangeKind
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "data": self.data}


class ChangeFeed:
    """The changes so far, waiting for a condition over them, and queues of the changes to come."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self._seq = itertools.count(1)
        self._condition = asyncio.Condition()
        self._subscribers: set[asyncio.Queue[Change]] = set()

    @property
    def last_seq(self) -> int:
        """The latest change's `seq`, 0 before the first."""
        return self.changes[-1].seq if self.changes else 0

    async def publish(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        """Record a change, hand it to every subscriber and wake every `wait_for`."""
        change = Change(seq=next(self._seq), kind=kind, data=data)
        self.changes.append(change)
        for queue in self._subscribers:
            queue.put_nowait(change)
        async with self._condition:
            self._condition.notify_all()

    async def wait_for(self, predicate: Callable[[], T], *, timeout: float = 10.0) -> T:  # noqa: ASYNC109
        """Wait until `predicate()` is truthy (re-checked on every change) and return its value."""
        async with asyncio.timeout(timeout):
            async with self._condition:
                while True:
                    value = predicate()
                    if value:
                        return value
                    await self._condition.wait()

    def subscribe(self) -> asyncio.Queue[Change]:
        """A queue that receives every later change; `unsubscribe` it when done."""
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change]) -> None:
        self._subscribers.discard(queue)
