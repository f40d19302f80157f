"""Where an `AgentRun` begins, read from the store before anything is written: a new
conversation, its continuation, the resume of a paused run (its answers checked), or an earlier
attempt of the same run id (replayed or continued); and the claim of the paused parent.

Kept apart from the loop (`bot/_run.py`) as the store's mixins are (`state/_redis_answers.py`):
`RunBegin` is the half of `AgentRun` that decides where it starts, no writes but the claim."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from state import PendingCall, RunRecord, RunStore, StopGuard, ThreadStop

from ._command import as_command_input
from ._errors import (
    RunAlreadyResumed,
    RunNotFound,
    RunNotPaused,
    RunStopped,
    UnknownInteraction,
    UsageError,
)
from ._journal import INTERRUPTED_BY_CRASH, INTERRUPTED_BY_STOP, closing_results, tool_message
from ._schema import check_answer
from ._suspend import Cancel

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Begin", "RunBegin", "now_ms"]

SUPERSEDED = "Superseded: the user did not answer and sent a new message instead."

ID_SCHEME = 2
"""How new runs derive interaction ids (see `RunRecord.id_scheme`)."""

LAYOUT = 2
"""How new runs store their transcript (see `RunRecord.layout`): appended to the conversation's
transcript log, each message once."""


def now_ms() -> int:
    """The wall clock in milliseconds, as runs record their start (`t0`) and end (`t1`)."""
    return int(time.time() * 1000)


@dataclass(kw_only=True)
class Begin:
    """Where a run starts, as read from the store before anything is written."""

    run: RunRecord
    replay: bool = False
    """`run` is this very run as an earlier attempt saved it paused or ended (not interrupted):
    emit its events, run nothing."""
    claim: RunRecord | None = None
    """The paused parent to claim before the run starts."""
    cancel_reason: str | None = None
    superseded: RunRecord | None = None
    """The paused parent a new message moves on from, as read: its calls never run, so once it
    is claimed inner runs it waits on are cancelled and a command's typed value is scrubbed."""
    durable: bool = False
    """Whether `run.pending_calls` came from the store (see `Step.durable`)."""
    how: str = "new"
    """How the run starts, for the metrics: new, continue, resume, or retry."""


class RunBegin:
    """The half of `AgentRun` that reads where the run starts and claims the paused parent."""

    agent: Agent
    run_id: str
    prompt: str | None
    parent_id: str | None
    resume: dict[str, Any] | None
    by: tuple[str, ...]
    channel: str | None
    thread: tuple[str, str] | None
    stop_seen: str | None
    direct: PendingCall | None
    _claimed: RunRecord | None
    _chosen: bool
    _resumed: RunRecord | None
    """The paused parent this run resumes, as read (`scrub_command`)."""

    async def _begin(self, store: RunStore) -> Begin:
        """Read the parent (and an earlier attempt of this run) and check the resume; no writes."""
        if self._claimed is not None and self.resume is not None:
            # Claimed for this run by the caller just now, so no attempt of it saved anything.
            return self._resume_from(self._claimed, self.resume)
        if self.parent_id is not None and self.resume is not None and not self._chosen:
            # A fresh run id has no earlier attempt to look for: the claim reads the parent.
            return await self._claim_resume(store, self.parent_id, self.resume)
        parent: RunRecord | None = None
        if self.parent_id is not None:
            parent = await store.load_run(self.parent_id)
            if parent is None:
                raise RunNotFound(f"No run `{self.parent_id}` in the store", run_id=self.parent_id)
        # An earlier attempt claims a paused parent before it saves anything, so a parent that is
        # paused and unclaimed means there is none: that read is saved on the common path.
        unclaimed = parent is not None and parent.status == "paused" and parent.resumed_by is None
        if self._chosen and not unclaimed:
            saved = await store.load_run(self.run_id)
            if saved is not None:
                return self._earlier_attempt(saved)
        if parent is None:
            return Begin(run=self._new_run())
        if self.resume is not None:
            return self._resume_from(parent, self.resume)
        return self._continue_from(parent)

    async def _claim_resume(self, store: RunStore, parent_id: str, resume: dict[str, Any]) -> Begin:
        """The resume's claim, made with the read of the parent (one store call, not two), then
        the checks a read parent gets; answers refused after a won claim give it back, so a
        refusal leaves the parent as it found it (a loser meanwhile saw it claimed)."""
        claim = await store.claim_run(parent_id, child_id=self.run_id, read=True)
        if claim.run is None:
            raise RunNotFound(f"No run `{parent_id}` in the store", run_id=parent_id)
        try:
            begin = self._resume_from(claim.run, resume)
        except BaseException:
            if claim.won:
                await store.release_run(parent_id, child_id=self.run_id)
            raise
        if not claim.won:
            self._lost(parent_id, claim.stopped, claim.run)
        return begin

    def _earlier_attempt(self, saved: RunRecord) -> Begin:
        self._check_channel(saved)
        if saved.agent_name != self.agent.name or saved.parent_id != self.parent_id:
            raise UsageError(
                f"Run id `{self.run_id}` already names a run of agent `{saved.agent_name}` with "
                f"parent `{saved.parent_id}`; a retry must repeat the call that made it"
            )
        if saved.status == "running" or saved.reason == "interrupted":
            # Its process died while tools ran (continue from the journal), or its task was
            # cancelled, as a worker that shuts down does to hand its work on: a retry finishes
            # the work, and the calls that were stopped keep their "Interrupted" results.
            saved.status, saved.reason, saved.message = "running", None, None
            return Begin(run=saved, durable=True, how="retry")
        return Begin(run=saved, replay=True)

    def _new_run(self) -> RunRecord:
        run = RunRecord(
            run_id=self.run_id,
            parent_id=None,
            agent_name=self.agent.name,
            status="running",
            input=self.prompt,
            t0=now_ms(),
            root_id=self.run_id,
            id_scheme=ID_SCHEME,
            layout=LAYOUT,
            transcript_id=self.run_id,
            requesters=list(dict.fromkeys(self.by)),
            channel=self.channel,
            thread=self.thread,
            stop_seen=self.stop_seen,
        )
        if self.agent.system_prompt:
            run.transcript.append({"role": "system", "content": self.agent.system_prompt})
        run.transcript.append({"role": "user", "content": self.prompt})
        if self.direct is not None:
            tool = self.agent.tools.get(self.direct.name)
            as_command_input(run, self.direct, tool.redact if tool else frozenset())
        return run

    def _child(self, parent: RunRecord, *, id_scheme: int) -> RunRecord:
        # The child appends to its parent's transcript log after the parent's last message; a
        # parent that kept its transcript inline (saved before layout 2, or a fallback) is
        # copied once into a log named by the child.
        appended = parent.layout == LAYOUT and parent.transcript_id is not None
        return RunRecord(
            run_id=self.run_id,
            parent_id=parent.run_id,
            agent_name=self.agent.name,
            status="running",
            input=self.prompt,
            t0=now_ms(),
            # A parent saved before runs had a root: its own id still tells its thread apart.
            root_id=parent.root_id or parent.run_id,
            id_scheme=id_scheme,
            transcript=list(parent.transcript),
            layout=LAYOUT,
            transcript_id=parent.transcript_id if appended else self.run_id,
            base=len(parent.transcript) if appended else 0,
            requesters=list(dict.fromkeys([*_turn_requesters(parent), *self.by])),
            # The conversation stays in its channel (`_check_channel`); a parent saved before
            # runs kept theirs takes the caller's.
            channel=parent.channel if parent.channel is not None else self.channel,
            # A new turn says where it is and which stop it began under; a resume goes on with
            # its parent's turn, so a stop of that turn stops it too.
            thread=self.thread if self.resume is None else parent.thread,
            stop_seen=self.stop_seen if self.resume is None else parent.stop_seen,
        )

    def _check_channel(self, parent: RunRecord) -> None:
        # A card answered, or a message sent, in another channel than the conversation's would
        # otherwise run its calls under that channel's tool set and rules: refused, not mixed.
        if (
            self.channel is not None
            and parent.channel is not None
            and parent.channel != self.channel
        ):
            raise UsageError(
                f"Run `{parent.run_id}` is a conversation in `{parent.channel}`; it cannot be "
                f"resumed or continued in `{self.channel}`"
            )

    def _resume_from(self, parent: RunRecord, resume: dict[str, Any]) -> Begin:
        self._check_channel(parent)
        if parent.agent_name != self.agent.name:
            # Interaction ids include the agent's name, so another agent's handlers could never
            # find these answers: they would ask again, forever.
            raise UsageError(
                f"Run `{parent.run_id}` belongs to agent `{parent.agent_name}`; "
                f"agent `{self.agent.name}` cannot resume it"
            )
        self._check_paused(parent)
        cancel_reason, accepted = _check_answers(parent, resume)
        self._resumed = parent
        # The handlers that resume recompute the ids they paused with: same scheme as the parent.
        run = self._child(parent, id_scheme=parent.id_scheme)
        run.input = parent.input if self.prompt is None else self.prompt
        run.pending_calls = list(parent.pending_calls)
        run.interactions = list(parent.interactions)
        run.nested = dict(parent.nested)
        run.input_required = dict(parent.input_required)
        run.answers = {**parent.answers, **accepted}
        return Begin(
            run=run,
            claim=self._to_claim(parent),
            cancel_reason=cancel_reason,
            durable=True,
            how="resume",
        )

    def _continue_from(self, parent: RunRecord) -> Begin:
        self._check_channel(parent)
        run = self._child(parent, id_scheme=ID_SCHEME)
        claim: RunRecord | None = None
        if parent.status == "paused":
            self._check_paused(parent)
            claim = self._to_claim(parent)
            run.transcript += [
                tool_message(c.tool_call_id, SUPERSEDED) for c in parent.pending_calls
            ]
        elif parent.status == "running":
            # Its process died while tools ran (a thread runs one turn at a time, so the caller
            # knows it is not running elsewhere): close its calls with what the journal says.
            run.transcript += closing_results(
                parent, started=INTERRUPTED_BY_CRASH, not_started=INTERRUPTED_BY_STOP
            )
        run.transcript.append({"role": "user", "content": self.prompt})
        # A paused command's typed value is scrubbed once claimed (`AgentRun._events`).
        command = isinstance(parent.input, dict) and "command" in parent.input
        superseded = parent if parent.status == "paused" and (parent.nested or command) else None
        return Begin(run=run, claim=claim, superseded=superseded, how="continue")

    def _to_claim(self, parent: RunRecord) -> RunRecord | None:
        # Claimed already by this very run id: an earlier attempt that saved nothing after it.
        return None if parent.resumed_by == self.run_id else parent

    def _check_paused(self, parent: RunRecord) -> None:
        if parent.status != "paused":
            raise RunNotPaused(
                f"Run `{parent.run_id}` is not paused (status `{parent.status}`); "
                "only a paused run can be resumed",
                run_id=parent.run_id,
                status=parent.status,
            )
        if parent.resumed_by is not None and parent.resumed_by != self.run_id:
            raise _already(parent.run_id, parent.resumed_by)

    async def _claim(self, store: RunStore, parent: RunRecord) -> None:
        # A resume answers the turn's own requests: refused, in the claim, once that turn was
        # stopped. A new message that moves on from a paused run starts a turn of its own.
        guard = None
        if self.resume is not None and parent.thread is not None:
            guard = StopGuard(
                run_id=parent.run_id, channel=parent.thread[0], thread_ts=parent.thread[1]
            )
        claim = await store.claim_run(parent.run_id, child_id=self.run_id, stop=guard)
        if not claim.won:
            self._lost(parent.run_id, claim.stopped, claim.run)

    def _lost(self, run_id: str, stopped: ThreadStop | None, stored: RunRecord | None) -> None:
        """Raise why a claim was lost (`stopped`, the run as `stored`), unless it is this run's
        own (nothing to raise)."""
        if stopped is not None:
            raise RunStopped(
                f"Run `{run_id}` belongs to a turn that was stopped",
                run_id=run_id,
                stop=stopped,
            )
        if stored is None:
            raise RunNotFound(f"No run `{run_id}` in the store", run_id=run_id)
        if stored.resumed_by == self.run_id:
            return  # our own earlier attempt (a store whose claim is not idempotent says lost)
        self._check_paused(stored)
        raise _already(run_id, stored.resumed_by)


def _turn_requesters(parent: RunRecord) -> list[str]:
    """Who shaped the parent's turn, if a child goes on with that turn: it does unless the
    parent ended (answered, failed, or cancelled by an answer). A paused, running or stopped
    parent has given no final answer yet, so its people stay requesters (failing closed)."""
    ended = parent.status in ("success", "error") or parent.reason == "cancelled"
    return [] if ended else parent.requesters


def _check_answers(parent: RunRecord, resume: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The cancel reason if one was given, and the other answers checked, as JSON data."""
    waiting = {i.interaction_id: i for i in parent.interactions}
    cancel: str | None = None
    accepted: dict[str, Any] = {}
    for iid, value in resume.items():
        interaction = waiting.get(iid)
        if interaction is None:
            known = ", ".join(f"`{k}`" for k in waiting) or "nothing"
            raise UnknownInteraction(
                f"Run `{parent.run_id}` is not waiting for interaction `{iid}` "
                f"(it is waiting for {known})",
                run_id=parent.run_id,
                interaction_id=iid,
            )
        value = _as_cancel(value)
        if isinstance(value, Cancel):
            cancel = cancel or str(value.reason)
            continue
        accepted[iid] = check_answer(parent.run_id, interaction, value)
    return cancel, accepted


def _as_cancel(value: Any) -> Any:
    """`Cancel` for its JSON form, `{"type": "cancel", "reason": "..."}` (`reason` optional),
    which clients that cannot build Python objects send; any other value as it is."""
    if (
        isinstance(value, dict)
        and value.get("type") == "cancel"
        and set(value) <= {"type", "reason"}
        and isinstance(value.get("reason", ""), str)
    ):
        return Cancel(value.get("reason") or "cancelled")
    return value


def _already(run_id: str, resumed_by: str | None) -> RunAlreadyResumed:
    return RunAlreadyResumed(
        f"Run `{run_id}` was already resumed by run `{resumed_by}`",
        run_id=run_id,
        resumed_by=resumed_by,
    )
