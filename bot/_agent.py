"""`Agent`: the model/tool loop that pauses on `suspend()` and resumes from the store."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any, Literal

from state import PendingCall, RunRecord, Store, StoreError, open_store

from . import _logging, _metrics
from ._command import as_command_input, command_output, direct_call
from ._errors import RunAlreadyResumed, RunNotFound, RunNotPaused, UnknownInteraction, UsageError
from ._journal import (
    INTERRUPTED_BY_CRASH,
    INTERRUPTED_BY_STOP,
    Journal,
    closing_results,
    tool_message,
)
from ._model import Model, ModelResponse, ToolCall, resolve_model
from ._nested import AgentTool, cancel_nested
from ._replay import EventCode, interaction_event, output_event, replayed
from ._schema import check_answer
from ._step import APPROVAL_SCHEMA, Outcome, Step
from ._suspend import Cancel
from ._tool import ApprovalRule, Tool, as_tool
from .events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent, ToolEvent

__all__ = ["APPROVAL_SCHEMA", "Agent", "AgentRun"]

log = logging.getLogger("handback.agent")

Event = StartEvent | DeltaEvent | ToolEvent | InteractionEvent | OutputEvent

SUPERSEDED = "Superseded: the user did not answer and sent a new message instead."
STOPPED = "the run was stopped"
"""The status message of a run ended `cancelled/interrupted`."""

_FAILED_RESULTS = ("Error:", "Denied:", "Interrupted:", "Cancelled:", "Superseded:")
"""How the runtime's results of calls that did not happen begin (`ToolEvent.status` `failed`)."""

ID_SCHEME = 2
"""How new runs derive interaction ids (see `RunRecord.id_scheme`)."""

LAYOUT = 2
"""How new runs store their transcript (see `RunRecord.layout`): appended to the conversation's
transcript log, each message once."""

# Caller-chosen run ids become store keys and appear in logs and Slack payloads.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}")


def _now_ms() -> int:
    return int(time.time() * 1000)


class Agent:
    """An LLM agent whose tools may pause the run with `suspend()` and be resumed later."""

    def __init__(
        self,
        name: str,
        model: str | Model,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        system_prompt: str | None = None,
        max_iterations: int = 10,
        store: Store | None = None,
        description: str | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise UsageError(f"Agent name must be a non-empty string, got {name!r}")
        if max_iterations < 1:
            raise UsageError(f"max_iterations must be at least 1, got {max_iterations!r}")
        self.name = name
        self.description = description
        """What the agent does, for the model of an agent that uses this one as a tool."""
        self.model = resolve_model(model)
        self.tools: dict[str, Tool] = {}
        for item in tools:
            tool = item.as_tool() if isinstance(item, Agent) else as_tool(item)
            if tool.name in self.tools:
                raise UsageError(f"Agent `{name}` has two tools named `{tool.name}`")
            self.tools[tool.name] = tool
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.store: Store | None = store
        """Where runs are saved; None opens `HANDBACK_STORE` (default SQLite) on first use."""
        self.commands: dict[str, Tool] = {}
        """The tools people may run as slash commands, by command (`/deploy`)."""
        for tool in self.tools.values():
            if tool.command is not None:
                if tool.command in self.commands:
                    raise UsageError(f"Agent `{name}` has two tools for `{tool.command}`")
                self.commands[tool.command] = tool
        self._tool_specs = [tool.spec() for tool in self.tools.values()]
        self._owned = AsyncExitStack()
        self._store_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={list(self.tools)!r})"

    def as_tool(
        self, *, description: str | None = None, requires_approval: ApprovalRule = False
    ) -> Tool:
        """This agent as a tool of another agent (what `tools=[agent]` does with defaults): the
        model sends it a prompt, its answer is the tool result, and its pauses pause the caller
        (see `bot/_nested.py`)."""
        return AgentTool(self, description=description, requires_approval=requires_approval)

    def __call__(
        self,
        prompt: str | None = None,
        parent_id: str | None = None,
        resume: dict[str, Any] | None = None,
        run_id: str | None = None,
        by: Sequence[str] = (),
        claimed: RunRecord | None = None,
    ) -> AgentRun:
        """A run of this agent: a new conversation (`prompt`), its continuation (`parent_id` and
        `prompt`), or the resume of a paused run (`parent_id` and `resume`).

        `run_id` names the run instead of a fresh id; calling again with the same id (a retried
        work item) never runs what the earlier attempt ran: a run it saved paused or ended emits
        its events again from the store, one whose process died while tools ran continues.

        `by` names the people behind this call (who sent the prompt, who gave the answers); the
        run keeps them with those of its parent while the turn goes on (`AgentRun.requesters`).
        `claimed` is the paused parent as a store claim just returned it, claimed for `run_id`
        (e.g. by `answer_and_claim`, with the answer): the resume then reads and claims nothing
        before it runs. Only for a claim this call's caller won just now: a run whose earlier
        attempt may have saved something must be resumed without it, so that it is found.
        """
        if run_id is not None:
            if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
                raise UsageError(
                    "run_id must be 1-200 ASCII letters, digits, `_`, `.`, `:`, `/` or `-`, "
                    f"starting with a letter or digit, got {run_id!r}"
                )
            if run_id == parent_id:
                raise UsageError(f"run_id {run_id!r} cannot be its own parent_id")
        if resume is not None:
            if not isinstance(resume, dict):
                raise UsageError(
                    "resume must be a dict of {interaction_id: value}, "
                    f"got {type(resume).__name__}"
                )
            if not resume:
                raise UsageError("resume must answer at least one interaction")
            if parent_id is None:
                raise UsageError("resume needs parent_id: the run_id of the paused run")
        elif prompt is None:
            raise UsageError("an agent call needs a prompt, or parent_id and resume")
        if claimed is not None and (
            resume is None
            or run_id is None
            or claimed.run_id != parent_id
            or claimed.resumed_by != run_id
        ):
            raise UsageError(
                "claimed must be the paused parent (parent_id) claimed for run_id, with resume"
            )
        if prompt is not None and not isinstance(prompt, str):
            raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
        if isinstance(by, str) or not all(isinstance(person, str) and person for person in by):
            raise UsageError(f"by must be a sequence of non-empty str, got {by!r}")
        return AgentRun(
            self,
            prompt=prompt,
            parent_id=parent_id,
            resume=resume,
            run_id=run_id,
            by=by,
            claimed=claimed,
        )

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        text: str | None = None,
        run_id: str | None = None,
    ) -> AgentRun:
        """A run that calls one tool directly, as a person's command does (`/deploy api 2.3`):
        through the approval gate like a call of the model, without the model; the tool's
        result is the output. `text` is what the person typed (the run's user message).

        The run is a conversation like any other: resumed with `parent_id` and `resume`, and
        continued by the model with `parent_id` and a prompt.
        """
        if name not in self.tools:
            raise UsageError(f"Agent `{self.name}` has no tool `{name}`")
        if not isinstance(arguments, dict):
            raise UsageError(f"arguments must be a dict, got {type(arguments).__name__}")
        run = self(prompt=text if text is not None else f"Run `{name}`.", run_id=run_id)
        run.direct = direct_call(name, arguments, run.run_id)
        return run

    def _nested_run(
        self,
        *,
        prompt: str | None,
        parent_id: str | None,
        resume: dict[str, Any] | None,
        run_id: str,
        path: str,
        store: Store,
    ) -> AgentRun:
        """A run of this agent as a tool of another (`bot/_nested.py` derives the arguments)."""
        return AgentRun(
            self,
            prompt=prompt,
            parent_id=parent_id,
            resume=resume,
            run_id=run_id,
            path=path,
            store=store,
        )

    async def get_store(self) -> Store:
        if self.store is None:
            async with self._store_lock:
                if self.store is None:
                    self.store = await self._owned.enter_async_context(open_store(None))
        return self.store

    async def aclose(self) -> None:
        """Close the store this agent opened itself (a store passed in is the caller's) and the
        model's connections on this event loop."""
        await self._owned.aclose()
        close = getattr(self.model, "aclose", None)  # a model that holds connections has one
        if close is not None:
            await close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(kw_only=True)
class _Begin:
    """Where a run starts, as read from the store before anything is written."""

    run: RunRecord
    replay: bool = False
    """`run` is this very run as an earlier attempt saved it paused or ended (not interrupted):
    emit its events, run nothing."""
    claim: RunRecord | None = None
    """The paused parent to claim before the run starts."""
    cancel_reason: str | None = None
    superseded: RunRecord | None = None
    """The paused parent a new message moves on from: inner runs it waits on are cancelled."""
    durable: bool = False
    """Whether `run.pending_calls` came from the store (see `Step.durable`)."""
    how: str = "new"
    """How the run starts, for the metrics: new, continue, resume, or retry."""


class AgentRun:
    """One call of an agent: iterate it for events, or `await .collect()` for the output."""

    def __init__(
        self,
        agent: Agent,
        *,
        prompt: str | None,
        parent_id: str | None,
        resume: dict[str, Any] | None,
        run_id: str | None = None,
        path: str | None = None,
        store: Store | None = None,
        by: Sequence[str] = (),
        claimed: RunRecord | None = None,
    ) -> None:
        self.agent = agent
        self._claimed = claimed
        """The parent, claimed for this run by the caller just now (see `Agent.__call__`)."""
        self.by = tuple(by)
        self.path = path or agent.name
        """Where the run sits: the agent's name, or for an agent used as a tool the caller's
        path and the tool's (`outer.inner`). Its handlers' interaction ids hash it in."""
        self._store = store
        """The caller's store, for an agent used as a tool; else the agent's own."""
        self.direct: PendingCall | None = None
        """The tool call a person made (`Agent.call_tool`): the run's one step, without the
        model."""
        self.prompt = prompt
        self.parent_id = parent_id
        self.resume = resume
        self.run_id = run_id or "run_" + uuid.uuid4().hex
        self.output: OutputEvent | None = None
        self.requesters: list[str] = []
        """Who shaped the turn this run belongs to (`RunRecord.requesters`); known once the run
        started, and the same when an earlier attempt is replayed."""
        self._chosen = run_id is not None
        """A caller-chosen id may name an earlier attempt of this run, saved in the store."""
        self._started = False
        self._closing = False
        """The pause or end of the run is being saved: a cancellation must not undo it."""

    def __aiter__(self) -> AsyncIterator[Event]:
        self._start()
        return self._events(stream=True)

    async def collect(self) -> OutputEvent:
        """Run to the end (or the pause) without streaming and return the `OutputEvent`.

        After the run was iterated to its end, this returns that run's output without running
        anything again.
        """
        if self._started and self.output is not None:
            return self.output
        self._start()
        async for _ in self._events(stream=False):
            pass
        assert self.output is not None
        return self.output

    async def _settled(self) -> tuple[list[InteractionEvent], OutputEvent]:
        """Run without streaming: the interactions it paused on, and its output (how an agent
        used as a tool runs; its text is the caller's tool result, not the caller's stream)."""
        self._start()
        pending = [e async for e in self._events(stream=False) if isinstance(e, InteractionEvent)]
        assert self.output is not None
        return pending, self.output

    def _start(self) -> None:
        # Running twice would execute the tools again and overwrite the saved run of this id.
        if self._started:
            raise UsageError(
                f"Run `{self.run_id}` was already started; call the agent again for a new run"
            )
        self._started = True

    # The run itself ------------------------------------------------------------------------

    async def _events(self, *, stream: bool) -> AsyncIterator[Event]:
        store = self._store if self._store is not None else await self.agent.get_store()
        begin = await self._begin(store)
        run = begin.run
        self.requesters = list(run.requesters)
        _logging.bind(run_id=self.run_id)
        if begin.replay:
            # An earlier attempt paused or ended: its events, so that a retry can post the card
            # or the answer that the crashed attempt may not have posted.
            events, output = replayed(run, self.path)
            for earlier in events:
                yield earlier
            self.output = output
            yield output
            return
        journal = Journal(store, run)
        try:
            if begin.claim is not None:
                await self._claim(store, begin.claim)
            if begin.superseded is not None:
                parent = begin.superseded
                await cancel_nested(self, store, parent, "superseded", parent.pending_calls)
            _metrics.RUNS_STARTED.labels(how=begin.how).inc()
            yield StartEvent(run_id=self.run_id, parent_id=self.parent_id, path=self.path)
            if begin.cancel_reason is not None:
                yield await self._cancel(store, run, begin.cancel_reason, run.pending_calls)
                return
            try:
                async for event in self._loop(store, journal, run, begin.durable, stream):
                    yield event
            except StoreError:
                # The store failed, not the run: saving it `error` would need the store too,
                # and a retry with this run id continues from what the journal holds.
                raise
            except Exception as exc:
                # A model or runtime failure ends this run as `error`; it never leaves it unsaved.
                log.exception("run %s of agent %s failed", self.run_id, self.agent.name)
                _clear_step(run)
                message = f"{type(exc).__name__}: {exc}"
                yield await self._finish(store, run, "error", reason="exception", message=message)
        except asyncio.CancelledError:
            await self._stop(journal, run)
            raise

    async def _loop(
        self, store: Store, journal: Journal, run: RunRecord, durable: bool, stream: bool
    ) -> AsyncIterator[Event]:
        agent = self.agent
        iterations = 0
        while True:
            if run.pending_calls:
                step = Step(
                    agent_name=self.path,
                    tools=agent.tools,
                    run=run,
                    journal=journal,
                    durable=durable,
                )
                for call in _calls_to_run(run):
                    yield self._tool_event(call, "running")
                outcomes = await step.execute()
                for outcome in outcomes:
                    if outcome.result is not None:
                        yield self._tool_event(outcome.call, "done", outcome.result)
                ended = await self._settle(store, run, outcomes)
                if ended is not None:
                    for event in ended:
                        yield event
                    return
                output = command_output(run)
                if output is not None:  # a person's command: its result is the answer
                    run.output = output
                    yield await self._finish(store, run, "success")
                    return
            if iterations >= agent.max_iterations:
                message = f"Agent `{agent.name}` stopped after {agent.max_iterations} model calls"
                yield await self._finish(
                    store, run, "error", reason="max_iterations", message=message
                )
                return
            iterations += 1
            response: ModelResponse | None = None
            async for item in agent.model.respond(run.transcript, agent._tool_specs, stream=stream):
                if isinstance(item, str):
                    yield DeltaEvent(run_id=self.run_id, path=self.path, text=item)
                else:
                    response = item
            if response is None:
                raise RuntimeError(f"model {agent.model.name!r} returned no response")
            for key, value in response.usage.items():
                run.usage[key] = run.usage.get(key, 0) + value
            response.tool_calls = _unique_ids(response.tool_calls, run.transcript)
            run.transcript.append(response.message())
            if not response.tool_calls:
                run.output = response.text
                yield await self._finish(store, run, "success")
                return
            run.pending_calls = [
                PendingCall(tool_call_id=c.id, name=c.name, arguments=c.arguments)
                for c in response.tool_calls
            ]
            durable = False  # these calls are in no record yet

    def _tool_event(
        self, call: PendingCall, status: Literal["running", "done"], result: str | None = None
    ) -> ToolEvent:
        failed = result is not None and result.startswith(_FAILED_RESULTS)
        return ToolEvent(
            run_id=self.run_id,
            path=self.agent.name,
            tool_call_id=call.tool_call_id,
            name=call.name,
            status="failed" if failed else status,
            result=result,
        )

    async def _settle(
        self, store: Store, run: RunRecord, outcomes: list[Outcome]
    ) -> list[Event] | None:
        """Add the step's results to the transcript; the events that end the run, if it ends."""
        run.transcript += [
            tool_message(o.call.tool_call_id, o.result) for o in outcomes if o.result is not None
        ]
        cancelled = next((o.cancelled for o in outcomes if o.cancelled), None)
        if cancelled is not None:
            still_open = [o.call for o in outcomes if o.result is None]
            # The inner runs those calls wait on now, this step's (not the parent's).
            run.nested = {o.call.tool_call_id: o.nested for o in outcomes if o.nested is not None}
            return [await self._cancel(store, run, cancelled, still_open)]
        waiting = [o for o in outcomes if o.suspended]
        if waiting:
            return await self._pause(store, run, waiting)
        _clear_step(run)
        return None

    # Where a run starts -------------------------------------------------------------------

    async def _begin(self, store: Store) -> _Begin:
        """Read the parent (and an earlier attempt of this run) and check the resume; no writes."""
        if self._claimed is not None and self.resume is not None:
            # Claimed for this run by the caller just now, so no attempt of it saved anything.
            return self._resume_from(self._claimed, self.resume)
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
            return _Begin(run=self._new_run())
        if self.resume is not None:
            return self._resume_from(parent, self.resume)
        return self._continue_from(parent)

    def _earlier_attempt(self, saved: RunRecord) -> _Begin:
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
            return _Begin(run=saved, durable=True, how="retry")
        return _Begin(run=saved, replay=True)

    def _new_run(self) -> RunRecord:
        run = RunRecord(
            run_id=self.run_id,
            parent_id=None,
            agent_name=self.agent.name,
            status="running",
            input=self.prompt,
            t0=_now_ms(),
            root_id=self.run_id,
            id_scheme=ID_SCHEME,
            layout=LAYOUT,
            transcript_id=self.run_id,
            requesters=list(dict.fromkeys(self.by)),
        )
        if self.agent.system_prompt:
            run.transcript.append({"role": "system", "content": self.agent.system_prompt})
        run.transcript.append({"role": "user", "content": self.prompt})
        if self.direct is not None:
            as_command_input(run, self.direct)
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
            t0=_now_ms(),
            # A parent saved before runs had a root: its own id still tells its thread apart.
            root_id=parent.root_id or parent.run_id,
            id_scheme=id_scheme,
            transcript=list(parent.transcript),
            layout=LAYOUT,
            transcript_id=parent.transcript_id if appended else self.run_id,
            base=len(parent.transcript) if appended else 0,
            requesters=list(dict.fromkeys([*_turn_requesters(parent), *self.by])),
        )

    def _resume_from(self, parent: RunRecord, resume: dict[str, Any]) -> _Begin:
        if parent.agent_name != self.agent.name:
            # Interaction ids include the agent's name, so another agent's handlers could never
            # find these answers: they would ask again, forever.
            raise UsageError(
                f"Run `{parent.run_id}` belongs to agent `{parent.agent_name}`; "
                f"agent `{self.agent.name}` cannot resume it"
            )
        self._check_paused(parent)
        cancel_reason, accepted = _check_answers(parent, resume)
        # The handlers that resume recompute the ids they paused with: same scheme as the parent.
        run = self._child(parent, id_scheme=parent.id_scheme)
        run.input = parent.input if self.prompt is None else self.prompt
        run.pending_calls = list(parent.pending_calls)
        run.interactions = list(parent.interactions)
        run.nested = dict(parent.nested)
        run.answers = {**parent.answers, **accepted}
        return _Begin(
            run=run,
            claim=self._to_claim(parent),
            cancel_reason=cancel_reason,
            durable=True,
            how="resume",
        )

    def _continue_from(self, parent: RunRecord) -> _Begin:
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
        superseded = parent if parent.status == "paused" and parent.nested else None
        return _Begin(run=run, claim=claim, superseded=superseded, how="continue")

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

    async def _claim(self, store: Store, parent: RunRecord) -> None:
        claim = await store.claim_run(parent.run_id, child_id=self.run_id)
        if claim.won:
            return
        if claim.run is None:
            raise RunNotFound(f"No run `{parent.run_id}` in the store", run_id=parent.run_id)
        if claim.run.resumed_by == self.run_id:
            return  # our own earlier attempt (a store whose claim is not idempotent says lost)
        self._check_paused(claim.run)
        raise _already(parent.run_id, claim.run.resumed_by)

    # How a run ends -----------------------------------------------------------------------

    async def _pause(self, store: Store, run: RunRecord, waiting: list[Outcome]) -> list[Event]:
        run.pending_calls = [o.call for o in waiting]
        run.interactions = [i for o in waiting for i in o.suspended]
        run.nested = {o.call.tool_call_id: o.nested for o in waiting if o.nested is not None}
        keep = {iid for o in waiting for iid in o.used_answers}
        run.answers = {k: v for k, v in run.answers.items() if k in keep}
        run.results, run.started = {}, []
        # Saved before any interaction is emitted: a caller may stop iterating at the first one
        # and still resume with its id.
        output = await self._finish(store, run, "cancelled", reason="input_required", paused=True)
        return [*(interaction_event(run, self.path, i) for i in run.interactions), output]

    async def _cancel(
        self, store: Store, run: RunRecord, reason: str, still_open: list[PendingCall]
    ) -> OutputEvent:
        """End the run `cancelled/cancelled` (an answer was `Cancel`); the calls still open get
        `Cancelled: <reason>` so that a follow-up can continue from a valid transcript. Inner
        runs those calls paused on are cancelled first (a retry cancels them again harmlessly)."""
        await cancel_nested(self, store, run, reason, still_open)
        run.transcript += [
            tool_message(call.tool_call_id, f"Cancelled: {reason}") for call in still_open
        ]
        _clear_step(run)
        return await self._finish(store, run, "cancelled", reason="cancelled", message=reason)

    async def _finish(
        self,
        store: Store,
        run: RunRecord,
        code: EventCode,
        *,
        reason: str | None = None,
        message: str | None = None,
        paused: bool = False,
    ) -> OutputEvent:
        run.t1 = _now_ms()
        run.status = "paused" if paused else code
        run.reason, run.message = reason, message
        if code == "error":
            run.error = message
        self._closing = True
        await store.save_run(run)
        _metrics.RUNS_FINISHED.labels(status=run.status, reason=run.reason or "none").inc()
        why = f" ({run.reason})" if run.reason else ""
        # DEBUG: one line per run is a flood under load; the metrics count them at any level.
        log.debug("run %s of agent %s saved %s%s", run.run_id, self.agent.name, run.status, why)
        self.output = output_event(run, self.path)
        return self.output

    async def _stop(self, journal: Journal, run: RunRecord) -> None:
        """The task running this run was cancelled: save what it did, `cancelled/interrupted`.

        Calls in flight or not started get `INTERRUPTED_BY_STOP` so that the transcript stays
        valid and a follow-up (`parent_id` = this run) can continue from it.
        """
        if not self._closing:
            run.transcript += closing_results(
                run, started=INTERRUPTED_BY_STOP, not_started=INTERRUPTED_BY_STOP
            )
            _clear_step(run)
            run.t1 = _now_ms()
            run.status, run.reason, run.message = "cancelled", "interrupted", STOPPED
        # Else the pause or end was being saved: save that again, it may not have landed.
        await journal.save_stopped()


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


def _calls_to_run(run: RunRecord) -> list[PendingCall]:
    """The calls the next step will try: neither journaled nor waiting for an unanswered
    interaction."""
    waiting = {i.tool_call_id: i.interaction_id for i in run.interactions}
    calls = []
    for call in run.pending_calls:
        interaction_id = waiting.get(call.tool_call_id)
        if call.tool_call_id in run.results or (
            interaction_id is not None and interaction_id not in run.answers
        ):
            continue
        calls.append(call)
    return calls


def _clear_step(run: RunRecord) -> None:
    """Forget the step that just ended (its results are in the transcript now)."""
    run.pending_calls, run.interactions, run.answers, run.nested = [], [], {}, {}
    run.results, run.started = {}, []


def _already(run_id: str, resumed_by: str | None) -> RunAlreadyResumed:
    return RunAlreadyResumed(
        f"Run `{run_id}` was already resumed by run `{resumed_by}`",
        run_id=run_id,
        resumed_by=resumed_by,
    )


def _unique_ids(calls: list[ToolCall], transcript: list[dict[str, Any]]) -> list[ToolCall]:
    """The calls, with a fresh id for any that is empty or already used in the conversation.

    Some OpenAI-compatible servers send no ids, or `call_0` on every turn; the runtime keys
    pending calls and interaction ids by tool call id, so they must be unique.
    """
    seen = {
        call.get("id")
        for message in transcript
        for call in message.get("tool_calls") or ()
        if isinstance(call, dict)
    }
    unique: list[ToolCall] = []
    for call in calls:
        if not call.id or call.id in seen:
            call = replace(call, id="call_" + uuid.uuid4().hex[:24])
        seen.add(call.id)
        unique.append(call)
    return unique
