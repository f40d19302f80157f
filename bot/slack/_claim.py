"""Claiming an answer: the policy checked once more, the answer (or a vote) claimed with its
audit entry and, when it is the last the run waits for, the run and the thread in the same atomic
step (`answer_and_claim`); what the claim came back with is decided by a pure function
(`outcome_of`) and its effects run: resume, show the votes, finish a retry, or refuse."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, assert_never

import blocks
from state import AuditEntry, InteractionRecord, InteractionStore, kind_of

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import AnswerClaim, ThreadTake, TurnClaim

from .. import _metrics
from .._redact import redact
from ..mcp._elicit import answered_detail, question_suffix
from ._conversation import Conversations
from ._earlier import own_earlier_answer, own_earlier_vote
from ._live import answer_live
from ._recheck import Recheck
from ._refusal import Refusal
from ._refuse import Refuser
from ._resume import Resumes, shaped_by, thread_of
from ._stops import stop_guard, stopped_notice
from ._take import closed_reason
from ._turns import Thread, TurnHold
from ._votes import Votes, voted, votes_needed
from ._worker import Work

__all__ = ["Claims", "Outcome", "OutcomeKind", "outcome_of", "short_json"]

_EDIT_DETAIL_LIMIT = 4000
"""Characters of audit detail for an edited approval, which holds the arguments twice."""

_RULE_AT_ODDS = "This request's approval rule could not be checked, so nobody can approve it."

OutcomeKind = Literal["stopped", "resumed", "vote", "retry", "answered", "lost"]
"""What a claim came to: the turn was stopped (nothing taken), the run was claimed with the
answer and resumes now, a vote of several was counted (or repeated), an earlier attempt of this
work item had claimed it, the answer was taken but the run is resumed the long way (it waits for
more, or its thread is busy), or another answer (or an expiry) won."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """`outcome_of`'s decision."""

    kind: OutcomeKind
    reason: str = ""
    """What the person is told, for `lost`."""


def outcome_of(
    claim: AnswerClaim, *, user: str, answer: Any, work: Work | None, now: float, held: bool
) -> Outcome:
    """Decide from the claim alone what happens next; `held` when the claim asked for the
    run and the thread (a work item's, with the thread's turn held)."""
    stored = claim.record
    if claim.stopped is not None:
        return Outcome(kind="stopped")
    if claim.run is not None and stored is not None and held:
        return Outcome(kind="resumed")
    if (
        stored is not None
        and stored.status == "pending"
        and stored.expires_at > now
        and voted(stored, user)
    ):
        return Outcome(kind="vote")
    if (
        not claim.won
        and stored is not None
        and (
            own_earlier_answer(stored, user, work, answer)
            or own_earlier_vote(stored, user, work, answer)
        )
    ):
        return Outcome(kind="retry")
    if claim.won and stored is not None:
        return Outcome(kind="answered")
    if stored is not None and stored.status == "pending" and stored.expires_at > now:
        # Still open, yet lost: the store found the approval's rule at odds with the number
        # of approvers asked for (it fails closed), so nothing was approved.
        return Outcome(kind="lost", reason=_RULE_AT_ODDS)
    return Outcome(
        kind="lost", reason=closed_reason(stored) if stored else "handback has no such request."
    )


class Claims:
    """Claims answers that passed their checks, once, and runs what the claim came to."""

    def __init__(
        self,
        *,
        store: InteractionStore,
        conversations: Conversations,
        recheck: Recheck,
        resumes: Resumes,
        votes: Votes,
        refuser: Refuser,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.conversations = conversations
        self.recheck = recheck
        self.resumes = resumes
        self.votes = votes
        self.refuser = refuser
        self.clock = clock

    async def accept(
        self,
        record: InteractionRecord,
        *,
        user: str,
        answer: Any,
        work: Work | None = None,
        home: bool = False,
    ) -> None:
        """Claim the interaction for this answer; the first answer wins, later ones are told.

        The claim, its audit entry and, when this answer is the last the run waits for, the
        run's claim and the thread's lease are one atomic step in the store
        (`answer_and_claim`), so the resume that follows reads nothing before it runs. A run
        that waits for other answers too, or a thread busy with another turn, is resumed the
        long way (`Resumes.if_complete`), where the runtime claims the run.

        A retried work item finds its own earlier claim (same person, same answer): it goes on
        to the resume its first attempt may not have finished, and is not told "already".

        An Approve of a rule with `count` > 1 is one vote (`answer_and_claim(needed=...)`):
        before the last, the card shows who approved so far and stays open; the last answers
        with every approver and resumes as above. The same person twice counts once, and is
        told so.
        """
        note: str | None = None
        try:
            needed = votes_needed(record, answer)
        except Refusal as error:
            refusal: str | None = str(error)
        else:
            refusal, note = await self.recheck.refusal_now(record, user=user, answer=answer)
        if refusal is not None:
            await self._refuse(record, user=user, reason=refusal, home=home)
            return
        if blocks.is_live(record):
            # Asked during an open call: the process holding it takes the answer from the store.
            await answer_live(
                self.store,
                self.conversations.cards,
                record,
                user=user,
                answer=answer,
                clock=self.clock,
                refuse=lambda reason: self._refuse(record, user=user, reason=reason, home=home),
            )
            return
        if needed > 1:
            # A vote: the store adds who approved to the answer, with the last vote.
            kept = answer.items() if isinstance(answer, dict) else {"approved": True}.items()
            answer = {key: value for key, value in kept if key != "approvers"}
        child_id = None if work is None else work.run_id("resume")
        turns = self.conversations.turns
        hold = None if child_id is None else await turns.hold_turn(thread_of(record))
        try:
            claim = await self._claim(
                record, user=user, answer=answer, child_id=child_id, hold=hold, needed=needed
            )
            if claim.record is not None and (
                claim.won or own_earlier_answer(claim.record, user, work, answer)
            ):
                # A grant given with the answer: added after the claim under an id derived from
                # the interaction, so a retry of this item after a crash adds it, once.
                await self.conversations.grants.give(claim.record)
        except BaseException:
            if hold is not None:
                turns.let_go(hold)
            raise
        outcome = outcome_of(
            claim, user=user, answer=answer, work=work, now=self.clock(), held=hold is not None
        )
        if hold is not None and outcome.kind != "resumed":
            turns.let_go(hold)
        await self._run_outcome(
            outcome, record, claim, user=user, work=work, home=home, note=note, hold=hold
        )

    async def _run_outcome(
        self,
        outcome: Outcome,
        record: InteractionRecord,
        claim: AnswerClaim,
        *,
        user: str,
        work: Work | None,
        home: bool,
        note: str | None,
        hold: TurnHold | None,
    ) -> None:
        """The effects of what the claim came to (the turn is let go already, unless resumed)."""
        stored = claim.record
        child_id = None if work is None else work.run_id("resume")
        match outcome.kind:
            case "stopped":
                # The turn that asked was stopped since: the store took nothing (checked with
                # the answer), and the approver hears who stopped it and that nothing runs.
                assert claim.stopped is not None
                reason = stopped_notice(claim.stopped)
                await self._refuse(record, user=user, reason=reason, home=home)
            case "resumed":
                assert stored is not None and hold is not None and claim.run is not None
                await self._resume_now(
                    stored, claim, thread=thread_of(record), hold=hold, child_id=child_id
                )
            case "vote":
                assert stored is not None
                await self.votes.counted(
                    stored, user=user, partial=claim.partial, work=work, note=note
                )
            case "retry" | "answered":
                assert stored is not None
                if outcome.kind == "answered":
                    _metrics.ANSWERS.labels(outcome="accepted").inc()
                await self.conversations.cards.show_closed(stored)
                await self.resumes.if_complete(
                    stored.run_id, working_ts=stored.message_ts, child_id=child_id
                )
            case "lost":
                await self._refuse(record, user=user, reason=outcome.reason, home=home)
            case unreachable:
                assert_never(unreachable)

    async def _resume_now(
        self,
        stored: InteractionRecord,
        claim: AnswerClaim,
        *,
        thread: Thread,
        hold: TurnHold,
        child_id: str | None,
    ) -> None:
        """The claim took the run and the thread with the answer: resume at once."""
        _metrics.ANSWERS.labels(outcome="accepted").inc()
        turns = self.conversations.turns
        # The stop mark the resumed turn starts from came with the claim, read before anything
        # could show `processing`: the turn needs no read of its own.
        turns.leased(hold, ThreadTake(held=True, stop=claim.stop))
        try:
            await self.conversations.cards.show_closed(stored)
        except BaseException:
            turns.let_go(hold)
            raise
        await self.conversations.resume(
            run_id=stored.run_id,
            answers={stored.interaction_id: stored.answer},
            thread=thread,
            working_ts=stored.message_ts,
            child_id=child_id,
            hold=hold,
            claimed=claim.run,
            by=shaped_by([stored]),
        )

    async def _refuse(
        self, record: InteractionRecord, *, user: str, reason: str, home: bool
    ) -> None:
        await self.refuser.refuse(
            user=user,
            channel=record.channel,
            thread_ts=record.thread_ts,
            reason=reason,
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            home=home,
            record=record,
        )

    async def _claim(
        self,
        record: InteractionRecord,
        *,
        user: str,
        answer: Any,
        child_id: str | None,
        hold: TurnHold | None,
        needed: int,
    ) -> AnswerClaim:
        now = self.clock()
        if needed > 1:
            why = _gated_why(record)
            details = [f"approved {k} of {needed}{why}" for k in range(1, needed + 1)]
        else:
            details = [self._answer_detail(record, answer)]
        entries = [
            AuditEntry(
                at=now,
                action="answered",
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                user=user,
                detail=detail,
            )
            for detail in details
        ]
        turn = None
        if child_id is not None and hold is not None:
            turn = TurnClaim(
                run_id=record.run_id,
                child_id=child_id,
                lease=hold.lease,
                lease_ttl=self.conversations.turns.lease_ttl,
            )
        return await self.store.answer_and_claim(
            record.interaction_id,
            answer=answer,
            answered_by=user,
            now=now,
            audit=entries,
            turn=turn,
            needed=needed,
            stop=stop_guard(record),
        )

    def _answer_detail(self, record: InteractionRecord, answer: Any) -> str:
        """The `answered` audit detail of one person's answer."""
        if kind_of(record) == "elicitation":
            return answered_detail(record.payload, answer)
        # A modal's answer may hold a secret typed into a field: masked as shown.
        return (self._edit_detail(record, answer) or short_json(redact(answer))) + _gated_why(
            record
        )

    def _edit_detail(self, record: InteractionRecord, answer: Any) -> str | None:
        """The audit detail of an approval given with edited arguments: both versions, the
        call's as the card showed it and the edited one it runs with, redacted as the card is
        (an approver may type a secret into an object argument). None for any other answer."""
        edits = answer.get("arguments") if isinstance(answer, dict) else None
        if kind_of(record) != "approval" or not isinstance(edits, dict):
            return None
        original = record.payload.get("arguments")
        original = original if isinstance(original, dict) else {}
        locked = set(blocks.locked_arguments(record))
        edited = {**original, **{k: v for k, v in edits.items() if k not in locked}}
        tool = self.conversations.agent.tools_in(record.channel or None).get(
            str(record.payload.get("tool", ""))
        )
        detail = {
            "approved": answer.get("approved") is True,
            "arguments": {
                "original": redact(original),
                "edited": redact(edited, tool.redact if tool else frozenset()),
            },
        }
        return short_json(detail, limit=_EDIT_DETAIL_LIMIT)


def _gated_why(record: InteractionRecord) -> str:
    """What the audit says of an MCP tool's request: on which server and why it was gated (as
    its card does), or whose tool's question it is."""
    server = record.payload.get("server")
    match kind_of(record):
        case "approval":
            gated = record.payload.get("gated_because")
            return f" [MCP {server}: gated: {gated}]" if isinstance(gated, str) else ""
        case "elicitation":
            return question_suffix(record.payload)
        case "confirm" | "ask_user" | "ask_user_multi" | "custom":
            return ""
        case unreachable:
            assert_never(unreachable)


def short_json(value: Any, *, limit: int = 500) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
