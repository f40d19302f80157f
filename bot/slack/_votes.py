"""Approvals that need several approvers, as `Answers` counts them: how many votes an answer is
one of, who voted, and the open card after a vote that is not the last."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from state import CorruptRecordError, InteractionRecord, InteractionStore, approval_of, is_approval

# Used only by the Slack app's internals, kept out of `state.__all__` (not for users).
from state._approval_answer import approves

from .. import _metrics
from ._cards import Cards
from ._refusal import Refusal
from ._worker import Work

if TYPE_CHECKING:
    from ._recheck import Recheck

__all__ = ["Refuse", "Votes", "approves", "voted", "votes_needed"]

log = logging.getLogger("handback.slack")

_RULE_UNREADABLE = "This request's approval rule cannot be read, so nobody can approve it."


class Refuse(Protocol):
    """`Answers`' refusal: audited, and told to the person."""

    def __call__(
        self,
        *,
        user: str,
        channel: str | None,
        thread_ts: str | None,
        reason: str,
        interaction_id: str | None,
        run_id: str | None = None,
        home: bool = False,
    ) -> Awaitable[None]: ...


class Votes:
    """Shows the votes of an approval still open, and refuses a second vote by the same person."""

    def __init__(
        self, *, store: InteractionStore, cards: Cards, recheck: Recheck, refuse: Refuse
    ) -> None:
        self.store = store
        self.cards = cards
        self.recheck = recheck
        self._refuse = refuse

    async def counted(
        self,
        record: InteractionRecord,
        *,
        user: str,
        partial: bool,
        work: Work | None,
        note: str | None = None,
    ) -> None:
        """After a vote that is not the last: the card shows who approved so far (and `note`,
        on votes withdrawn before this one) and stays open. A second vote by the same person is
        refused, unless it is this work item's own retry."""
        if partial or (work is not None and work.retry):
            _metrics.ANSWERS.labels(outcome="accepted").inc()
            await self.show(record, note=note)
            return
        missing = votes_needed(record, {"approved": True}) - len(record.votes)
        more = "one more approver" if missing == 1 else f"{missing} more approvers"
        await self._refuse(
            user=user,
            channel=record.channel,
            thread_ts=record.thread_ts,
            reason=f"You already approved this; it needs {more}.",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
        )

    async def show(self, record: InteractionRecord, *, note: str | None = None) -> None:
        """Update the open card with the votes in `record` (and `note`). Another vote (or the
        last one, which closes the card) may have been stored and shown meanwhile, and this older
        picture must not land on top of it: the stored state is read again, and shown if it
        moved on."""
        if note is None:
            await self.cards.show_closed(record)
        else:
            await self.recheck.show_reopened(record, note)
        now = await self.store.get_interaction(record.interaction_id)
        if now is not None and (now.status != record.status or now.votes != record.votes):
            await self.cards.show_closed(now)


def votes_needed(record: InteractionRecord, answer: Any) -> int:
    """How many distinct approvers `answer` is one of: the rule's count for an Approve, 1 for
    a denial (one ends it) and for anything but an approval. Fails closed: a rule that does not
    read back is refused (the policy already refused it; this is the claim's own check)."""
    if not is_approval(record) or not approves(answer):
        return 1
    try:
        rule = approval_of(record)
    except CorruptRecordError as error:
        log.error("refusing an approval of %s: %s", record.interaction_id, error)
        raise Refusal(_RULE_UNREADABLE) from None
    return 1 if rule is None else rule.count


def voted(record: InteractionRecord, user: str) -> bool:
    return any(vote.user == user for vote in record.votes)
