"""Expiring interactions nobody answered in time: the card says so and the run is cancelled.
The same periodic sweep fires due reminders and escalations (`Nudges`)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import blocks
from state import AuditEntry, InteractionRecord

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import AuditedInteractions

from .. import Cancel
from ._conversation import Conversations
from ._nudges import Nudges
from ._turns import Thread
from ._worker import derived_run_id

__all__ = ["EXPIRED_REASON", "Sweeper"]

log = logging.getLogger("handback.slack")

EXPIRED_REASON = "the request expired before anyone answered"


class Sweeper:
    """Finds due interactions and expires them; `run_until_idle()` is the test entry point."""

    def __init__(
        self,
        *,
        store: AuditedInteractions,
        conversations: Conversations,
        interval: float,
        clock: Callable[[], float] = time.time,
        recover: Callable[[], Awaitable[int]] | None = None,
        nudges: Nudges | None = None,
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.interval = interval
        self.clock = clock
        self.recover = recover
        """Queues the resume of settled runs (`Answers.recover`); run after each sweep."""
        self.nudges = nudges
        """Fires due reminders and escalations, after the expiries of each sweep (so nothing
        is nudged that expired meanwhile)."""

    async def expire(self, record: InteractionRecord) -> bool:
        """Expire one interaction (once, atomically) and cancel its run; False if it was not
        pending any more."""
        now = self.clock()
        claim = await self.store.close_interaction(record.interaction_id, status="expired", now=now)
        if not claim.won or claim.record is None:
            return False
        closed = claim.record
        await self.store.audit(
            AuditEntry(
                at=now,
                action="expired",
                interaction_id=closed.interaction_id,
                run_id=closed.run_id,
                detail=f"expired at {closed.expires_at:.0f}",
            )
        )
        await self.conversations.cards.show_closed(closed)
        if blocks.is_live(closed):
            return True  # Asked during an open call: its waiter sees it expired and cancels.
        # The run cannot go on without this answer: its other questions close with it.
        await self.conversations.cards.close_pending(closed.run_id, status="cancelled", user=None)
        thread = Thread(
            channel=closed.channel,
            thread_ts=closed.thread_ts or closed.message_ts or "",
            requester=closed.requester,
        )
        await self.conversations.resume(
            run_id=closed.run_id,
            answers={closed.interaction_id: Cancel(EXPIRED_REASON)},
            thread=thread,
            # Whoever expires the interaction resumes as this child: one expiry, one child.
            child_id=derived_run_id(closed.interaction_id, "expire"),
        )
        return True

    async def sweep(self) -> int:
        """One pass over the interactions due now; how many were expired, reminded or
        escalated."""
        expired = 0
        for record in await self.store.due_interactions(self.clock()):
            try:
                if await self.expire(record):
                    expired += 1
            except Exception:
                log.exception("could not expire interaction %s", record.interaction_id)
        if self.nudges is not None:
            expired += await self.nudges.sweep()
        return expired

    async def run_until_idle(self) -> int:
        """Sweep until nothing is due; the total expired, reminded or escalated."""
        total = 0
        while count := await self.sweep():
            total += count
        return total

    async def run_forever(self) -> None:
        """Expire what is due, then queue the resume of runs answered but never resumed (a
        process died between the two), every `interval` seconds: recovery is continuous, not
        only at start-up."""
        while True:
            try:
                await self.run_until_idle()
                if self.recover is not None:
                    await self.recover()
            except Exception:
                log.exception("the sweep failed; trying again later")
            await asyncio.sleep(self.interval)
