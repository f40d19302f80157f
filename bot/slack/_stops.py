"""Who may stop a thread's turn, checked when the stop arrives and before anything is written;
and the claim that makes an allowed stop final for the run the thread waits on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from state import AuditEntry, InteractionRecord, StopGuard, ThreadStop, is_approval

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import StopWork

from ._chat import Chat, escape
from ._edge_models import SessionStopped
from ._policy import AnswerPolicy, GroupMembers
from ._session import mention
from ._worker import derived_run_id

__all__ = ["StopCheck", "StopDecision", "stop_child_id", "stop_guard", "stopped_notice"]

log = logging.getLogger("handback.slack")

NOT_YOURS = (
    "Only the person who started this request, or someone who may answer it, can stop it; "
    "nothing was stopped."
)
OTHER_WORKSPACE = "This conversation belongs to another workspace; nothing was stopped."


def stop_child_id(run_id: str) -> str:
    """The run a stop resumes `run_id` as (with `Cancel`): the web side claims the paused run
    for it when the stop arrives, and the stop's work item resumes it as that same child."""
    return derived_run_id(run_id, "stop")


def stop_guard(record: InteractionRecord) -> StopGuard | None:
    """The store's stop check for an answer to `record`: refused once the turn that asked was
    stopped (`RunRecord.stop_seen`). None for a request outside a thread (no stop reaches it)."""
    if not record.channel or not record.thread_ts:
        return None
    return StopGuard(run_id=record.run_id, channel=record.channel, thread_ts=record.thread_ts)


def stopped_notice(stop: ThreadStop) -> str:
    """What an approver whose answer lost to a stop is told: by whom, and that nothing runs."""
    return (
        f"This turn was stopped by {mention(stop.user)}, so your answer was not taken and "
        "nothing runs."
    )


@dataclass(kw_only=True, frozen=True)
class StopDecision:
    """What a stop that arrived may do: refused (with why, for its sender), or allowed, with
    what it found the thread waiting on."""

    refusal: str | None = None
    run_id: str | None = None
    """The paused run the thread points at, if any."""
    claimed: bool = False
    """The paused run is now the stop's (`stop_child_id`): nothing else resumes it."""
    approved_first: str | None = None
    """The paused run was claimed already by an answer: what that answer lets run, said to the
    person who pressed stop."""


class StopCheck:
    """Decides a stop on the web side: the sender must be of the app's workspace, and the turn's
    initiator or someone who may answer one of the open requests of the run it waits on."""

    def __init__(
        self,
        *,
        store: StopWork,
        chat: Chat,
        policy: AnswerPolicy,
        members: GroupMembers,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.chat = chat
        self.policy = policy
        self.members = members
        self.clock = clock

    async def decide(self, stopped: SessionStopped, *, team: str | None) -> StopDecision:
        """Reads only, until the stop is allowed; then claims the paused run for the stop."""
        channel, thread_ts = stopped.channel, stopped.thread_ts
        ours = await self.chat.team_id()
        teams = {t for t in (team, stopped.user_team, stopped.team) if t}
        # Fails closed: a stop whose workspace cannot be told apart from ours is refused.
        if ours is None or not teams or teams != {ours}:
            return StopDecision(refusal=OTHER_WORKSPACE)
        run_id = await self.store.get_thread_run(channel, thread_ts)
        records = [] if run_id is None else await self.store.run_interactions(run_id)
        if not await self._may_stop(stopped, records):
            return StopDecision(refusal=NOT_YOURS, run_id=run_id)
        if run_id is None:
            return StopDecision(run_id=None)
        claim = await self.store.claim_run(run_id, child_id=stop_child_id(run_id))
        if claim.won:
            return StopDecision(run_id=run_id, claimed=True)
        if claim.run is not None and claim.run.status == "paused" and claim.run.resumed_by:
            return StopDecision(run_id=run_id, approved_first=_what_runs(records))
        return StopDecision(run_id=run_id)

    async def _may_stop(self, stopped: SessionStopped, records: list[InteractionRecord]) -> bool:
        user = stopped.user
        initiator = await self.store.thread_initiator(stopped.channel, stopped.thread_ts)
        if user == initiator:
            return True
        for record in records:
            if record.status != "pending":
                continue
            if user == record.requester:
                return True
            # Stopping ends a request as a Deny would: whoever may deny it may stop it.
            if await self.policy.refusal(record, user, self.members, denying=True) is None:
                return True
        return False

    async def refused(self, stopped: SessionStopped, decision: StopDecision) -> None:
        """Audit the refusal (before the ack); `tell` its sender why, only them (after it)."""
        await self.store.audit(
            AuditEntry(
                at=self.clock(),
                action="refused",
                run_id=decision.run_id,
                user=stopped.user,
                detail=f"stop of {stopped.channel}/{stopped.thread_ts}: {decision.refusal}",
            )
        )

    async def tell(self, stopped: SessionStopped, decision: StopDecision) -> None:
        """What the person who pressed stop is told (ephemeral): why it was refused, or that an
        approval came first and what runs; nothing for a stop that simply took effect."""
        if decision.refusal is not None:
            text = decision.refusal
        elif decision.approved_first is not None:
            text = (
                f"An approval came first: {decision.approved_first} The turn is stopped: a tool "
                "that has not started does not run, one that has may finish."
            )
        else:
            return
        try:
            await self.chat.ephemeral(
                stopped.channel, stopped.user, text, thread_ts=stopped.thread_ts
            )
        except Exception:
            log.warning("could not tell %s about their stop", stopped.user, exc_info=True)


def _what_runs(records: list[InteractionRecord]) -> str:
    """The answered approvals of the run, in words we wrote (a tool name is ours, the approver
    an id made into a mention)."""
    said = [
        f"`{escape(str(record.payload.get('tool', 'a tool')))}` approved by "
        f"{mention(record.answered_by)}"
        for record in records
        if record.status == "answered" and is_approval(record)
    ]
    return (", ".join(said) or "an answer was taken") + "."
