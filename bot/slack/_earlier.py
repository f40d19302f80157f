"""What an earlier attempt of a work item stored: a retried click, modal answer or reply finds
its own claim (or vote) in the store, finishes the work it started, and is not told "already"."""

from __future__ import annotations

from typing import Any

from state import InteractionRecord

# Used only by the Slack app's internals, kept out of `state.__all__` (not for users).
from state._approval_answer import approves

from ._votes import voted
from ._worker import Work

__all__ = ["own_earlier_answer", "own_earlier_vote", "with_voters"]


def own_earlier_answer(
    record: InteractionRecord, user: str, work: Work | None, answer: Any = None
) -> bool:
    """Whether `record` holds what an earlier attempt of this work item claimed: a retry, the
    same person, and (when given) the same answer. A double click is two items, never a retry."""
    return (
        work is not None
        and work.retry
        and record.status == "answered"
        and record.answered_by == user
        and (answer is None or record.answer in (answer, with_voters(answer, record)))
    )


def own_earlier_vote(
    record: InteractionRecord, user: str, work: Work | None, answer: Any = None
) -> bool:
    """Whether `record` is an approval someone else's last vote answered after an earlier
    attempt of this work item stored `user`'s vote (and died before it finished): that vote
    counted, so the retry finishes as its own, and its voter is not told "already answered".
    With `answer` (the claim's check; the click's checks before it have none), only for an
    Approve."""
    return (
        work is not None
        and work.retry
        and record.status == "answered"
        and (answer is None or approves(answer))
        and approves(record.answer)
        and voted(record, user)
    )


def with_voters(answer: Any, record: InteractionRecord) -> Any:
    """`answer` as the store kept it when it was the last of several votes."""
    if not isinstance(answer, dict) or not record.votes:
        return answer
    return {**answer, "approvers": [vote.user for vote in record.votes]}
