"""Recovery: runs that wait for nothing (every answer is in, or the rest expired) but were never
resumed, found in the store (`settled_runs`) and resumed through an inbox item like a click's."""

from __future__ import annotations

import logging
from typing import Any

from state import CorruptRecordError, InteractionStatus, StoreError

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import RecoveryStore

from .. import Cancel
from ._conversation import Conversations
from ._expiry import EXPIRED_REASON
from ._recheck import Recheck
from ._resume import shaped_by, thread_of
from ._worker import Work

__all__ = ["Recovery"]

log = logging.getLogger("handback.slack")


class Recovery:
    """Queues and runs the resume of settled runs."""

    def __init__(
        self, *, store: RecoveryStore, conversations: Conversations, recheck: Recheck
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.recheck = recheck
        self._settled_before: set[str] = set()
        """Runs the last patient `recover()` found settled."""

    async def recover(self, *, page: int = 100, patient: bool = False) -> int:
        """Queue the resume of every run that waits for nothing but was never resumed; how many
        were queued now (a run already queued, and not finished, is not queued twice).

        A crash between the last claim (an answer, or an expiry) and the resume leaves exactly
        that, and the store lists such runs itself (`settled_runs`). The sweep calls this every
        few seconds. The resume is an inbox item like a click, so a crash during it is retried
        with the same child run id; a click's resume racing it is harmless: the run is claimed
        once.

        `patient` (the periodic sweep) queues only runs that were settled at its previous pass
        too: a click's own resume usually claims the run within moments (or is queued behind a
        busy thread), and racing every one of those would double the work under load.
        """
        queued = 0
        after: str | None = None
        seen: set[str] = set()
        while run_ids := await self.store.settled_runs(limit=page, after=after):
            after = run_ids[-1]
            seen.update(run_ids)
            for run_id in run_ids:
                if patient and run_id not in self._settled_before:
                    continue
                if await self._queue(run_id):
                    queued += 1
        if patient:
            self._settled_before = seen
        return queued

    async def _queue(self, run_id: str) -> bool:
        """Queue one settled run's resume, if it is this agent's; whether it was queued now."""
        try:
            run = await self.store.load_run(run_id)
        except CorruptRecordError:
            # One unreadable run must not keep the others from being recovered.
            log.exception("cannot recover run %s", run_id)
            return False
        if run is None or run.agent_name != self.conversations.agent.name:
            return False  # Another agent's run in a shared store is that agent's to resume.
        key = f"recover:{run_id}"
        return (
            await self.store.enqueue("recover", {"id": key, "run_id": run_id}, dedupe=key)
            is not None
        )

    async def recover_run(self, run_id: str, *, work: Work) -> bool:
        """Resume one settled run (a `recover` work item); False when it is not this agent's or
        not settled any more."""
        try:
            return await self._recover_run(run_id, child_id=work.run_id("resume"))
        except StoreError:
            raise
        except Exception:
            # An unreadable run is logged, not retried forever.
            log.exception("could not recover run %s", run_id)
            return False

    async def _recover_run(self, run_id: str, *, child_id: str) -> bool:
        run = await self.store.load_run(run_id)
        if run is None or run.agent_name != self.conversations.agent.name:
            return False  # Another agent's run in a shared store is that agent's to resume.
        records = await self.store.run_interactions(run_id)
        if not records or any(record.status == "pending" for record in records):
            return False
        if await self.recheck.withdraw_unallowed(records):
            return False
        log.info("recovering run %s: every answer is in, but it was never resumed", run_id)
        answers: dict[str, Any] = {}
        for record in records:
            # The process that took the answer may have died before the card showed it, or an
            # expiry was cut short: the card says so either way.
            await self.conversations.cards.show_closed(record)
            if record.status == "answered":
                answers[record.interaction_id] = record.answer
            else:
                # Closed unanswered: the run is cancelled as the sweep would have done.
                answers[record.interaction_id] = Cancel(_cancel_reason(record.status))
        await self.conversations.resume(
            run_id=run_id,
            answers=answers,
            thread=thread_of(records[0]),
            child_id=child_id,
            by=shaped_by(records),
        )
        return True


def _cancel_reason(status: InteractionStatus) -> str:
    if status == "expired":
        return EXPIRED_REASON
    if status == "superseded":
        return "the conversation moved on"
    return "the request was cancelled"
