"""Approvals checked again as they take effect: the answer policy applied once more, with user
groups read fresh, to an approval about to be claimed and to every approval a run would resume
with; approvals that no longer count are withdrawn in the store (audited) and their card reopened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import blocks
from state import AuditEntry, InteractionRecord, InteractionStore, is_approval

from ._cards import Cards
from ._chat import Chat
from ._policy import AnswerPolicy, GroupMembers, read_once
from ._votes import approves

__all__ = ["GRANT_TAKEN_BACK", "Recheck"]

log = logging.getLogger("handback.slack")


class Recheck:
    """The re-check `Answers` makes before a claim and before a resume."""

    def __init__(
        self,
        *,
        store: InteractionStore,
        chat: Chat,
        cards: Cards,
        policy: AnswerPolicy,
        fresh_members: GroupMembers,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.cards = cards
        self.policy = policy
        self.fresh_members = fresh_members
        """User groups read without a cache."""
        self.clock = clock

    async def refusal_now(
        self, record: InteractionRecord, *, user: str, answer: Any
    ) -> tuple[str | None, str | None]:
        """The policy once more for an approval about to be claimed, with user groups read
        fresh (each group once): the click was checked against a cached membership, and this
        claim may resume the run at once. `(why this person may not answer, or None; the note
        on votes withdrawn meanwhile, or None)`; `(None, None)` for anything that is not a
        pending approval.

        An Approve of a rule that needs several approvers is counted with the votes already in,
        so every earlier voter is checked too, and the vote of each who may no longer approve
        is withdrawn first (audited; the card says so): the click then counts as what it now
        is, and the tool never runs on fewer valid approvals than the rule asks."""
        if not is_approval(record) or record.status != "pending":
            return None, None
        members = read_once(self.fresh_members)
        denying = not approves(answer)
        note = None if denying else await self._withdraw_votes(record, members)
        refusal = await self.policy.refusal(record, user, members, denying=denying)
        return refusal, note

    async def _withdraw_votes(self, record: InteractionRecord, members: GroupMembers) -> str | None:
        """Withdraw, in the store, the votes in `record` that no longer count, and show the card
        with what is left and a note saying whose went and why (the note, or None when none
        went). A vote another click withdrew first is not said twice."""
        gone = await self.policy.withdrawals(record, members)
        said: dict[str, str] = {}
        reopened: InteractionRecord | None = None
        for voter, reason in gone.items():
            claim = await self.store.withdraw_vote(
                record.interaction_id, user=voter, audit=self._withdrawal(record, voter, reason)
            )
            if claim.won and claim.record is not None:
                log.info("withdrew %s's vote on %s: %s", voter, record.interaction_id, reason)
                said[voter] = reason
                reopened = claim.record
        if reopened is None:
            return None
        note = _withdrawal_note(said)
        await self.show_reopened(reopened, note)
        return note

    async def withdraw_unallowed(self, records: list[InteractionRecord]) -> bool:
        """Check every approval a run would resume with against the policy as it is now (user
        groups read fresh): each approver of an answered approval, every voter of one that needs
        several. Those that no longer count are withdrawn in the store (the votes of the others
        stay; back to pending, audited, only while the run is unclaimed) and the card reopened
        with a note. True when any did not count: the run then stays paused, waiting for more
        approvals."""
        refused = False
        members = read_once(self.fresh_members)
        for record in records:
            gone = await self.policy.withdrawals(record, members)
            if not gone or record.answered_by is None:
                continue
            refused = True
            claim = await self.store.withdraw_answer(
                record.interaction_id,
                answered_by=record.answered_by,
                run_id=record.run_id,
                voters=list(gone),
                audit=[self._withdrawal(record, voter, why) for voter, why in gone.items()],
            )
            if not claim.won or claim.record is None:
                continue
            log.info("withdrew approvals of %s by %s: %s", record.run_id, list(gone), gone)
            await self.show_reopened(claim.record, _withdrawal_note(gone))
        return refused

    def _withdrawal(self, record: InteractionRecord, voter: str, reason: str) -> AuditEntry:
        return AuditEntry(
            at=self.clock(),
            action="withdrawn",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            user=voter,
            detail=reason,
        )

    async def show_reopened(self, record: InteractionRecord, note: str) -> None:
        """The card of an approval some approvals were taken back from, open again with the
        votes left and `note`; Home lists it again for its approvers."""
        if record.channel and record.message_ts:
            card = blocks.with_note(self.cards.card(record), note)
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )
        elif record.channel:
            # Approved under a standing grant, so it never had a card: post one now, or the
            # request would wait with nothing anyone can click; and take back, in words, the
            # notice that said it runs without one.
            note += f" {GRANT_TAKEN_BACK}"
            card = blocks.with_note(self.cards.card(record), note)
            ts = await self.chat.post(
                record.channel, card["text"], thread_ts=record.thread_ts, blocks=card["blocks"]
            )
            if ts is None:
                log.error("could not post the card of reopened %s", record.interaction_id)
            else:
                await self.store.set_message(
                    record.interaction_id, channel=record.channel, message_ts=ts
                )
        if self.cards.home_changed is not None:
            self.cards.home_changed([record])  # it waits on its approvers again


GRANT_TAKEN_BACK = "It did not run under the standing grant: it waits for an approval here."


def _withdrawal_note(gone: dict[str, str]) -> str:
    """What a card says of approvals taken back: whose, and why (ours, or Slack's error code
    inside it, escaped)."""
    said = " ".join(
        f"{blocks.approver_mentions([voter])}'s approval was withdrawn: {blocks.escape(why)}."
        for voter, why in gone.items()
    )
    more = "another approval" if len(gone) == 1 else "more approvals"
    return f":warning: {said} It needs {more}."
