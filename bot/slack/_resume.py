"""Resuming a run once every interaction it waits for is answered, the long way: the answers are
read back, checked once more (`Recheck`), and the runtime claims the run, so two processes
racing here resume it once."""

from __future__ import annotations

from typing import Any

from state import InteractionRecord, InteractionStore, is_approval

from ._conversation import Conversations
from ._recheck import Recheck
from ._turns import Thread

__all__ = ["Resumes", "shaped_by", "thread_of"]


class Resumes:
    """Resumes runs whose answers are all in."""

    def __init__(
        self, *, store: InteractionStore, conversations: Conversations, recheck: Recheck
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.recheck = recheck

    async def if_complete(
        self, run_id: str, *, working_ts: str | None = None, child_id: str | None = None
    ) -> bool:
        """Resume the run when every interaction it waits for is answered (the runtime claims
        the run, so two processes racing here resume it once)."""
        records = await self.store.run_interactions(run_id)
        if not records or any(record.status != "answered" for record in records):
            return False
        if await self.recheck.withdraw_unallowed(records):
            return False
        await self.conversations.resume(
            run_id=run_id,
            answers={record.interaction_id: record.answer for record in records},
            thread=thread_of(records[0]),
            working_ts=working_ts,
            child_id=child_id,
            by=shaped_by(records),
        )
        return True


def shaped_by(records: list[InteractionRecord]) -> list[str]:
    """Who, by answering these, shaped what the run does next: they count as requesters of the
    turn's later approvals (four eyes). A plain approval is not among them: it carries nothing
    the model could be steered with (a denial's reason does, and so does any answer to a
    question), and counting it would stop an approver from approving the next call of the same
    turn."""
    return [
        record.answered_by
        for record in records
        if record.answered_by and not (is_approval(record) and _plain_approval(record.answer))
    ]


def _plain_approval(answer: Any) -> bool:
    if isinstance(answer, dict):
        # Edited arguments are the approver's words in the call, as a reason would be.
        return (
            answer.get("approved") is True
            and not answer.get("reason")
            and "arguments" not in answer
        )
    return answer is True


def thread_of(record: InteractionRecord) -> Thread:
    """The thread a request was asked in (its card's, for a request asked outside a thread)."""
    return Thread(
        channel=record.channel,
        thread_ts=record.thread_ts or record.message_ts or "",
        requester=record.requester,
    )
