"""`AgentRun`: one call of an agent, the model/tool loop that pauses on `suspend()` and resumes
from the store; how a run pauses, ends and is stopped. Where it begins is `RunBegin`
(`bot/_begin.py`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from state import PendingCall, RunRecord, RunStore, StoreError

from . import _logging, _metrics
from ._begin import RunBegin, now_ms
from ._channels import ChannelTools
from ._command import command_output, scrub_command
from ._errors import ModelCallError, RunStopped, UsageError
from ._journal import INTERRUPTED_BY_STOP, Journal, StartRefused, closing_results, tool_message
from ._model import ModelResponse, ToolCall, describe_failure, from_sdk
from ._nested import cancel_nested
from ._replay import EventCode, output_event, replayed
from ._step import Outcome, Step
from ._tool import Tool
from .events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent, ToolEvent

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["AgentRun", "StoppedCall"]

log = logging.getLogger("handback.agent")

Event = StartEvent | DeltaEvent | ToolEvent | InteractionEvent | OutputEvent

STOPPED = "the run was stopped"
"""The status message of a run ended `cancelled/interrupted`."""

_FAILED_RESULTS = ("Error:", "Denied:", "Interrupted:", "Cancelled:", "Superseded:")
"""How the runtime's results of calls that did not happen begin (`ToolEvent.status` `failed`)."""


@dataclass(kw_only=True, frozen=True)
class StoppedCall:
    """A call of the step a run was in when it was stopped, and what became of it: its result
    was in (`ran`), its handler had started (`interrupted`: it may or may not have taken
    effect) or had not (`not_started`)."""

    tool_call_id: str
    name: str
    outcome: Literal["ran", "interrupted", "not_started"]


class AgentRun(RunBegin):
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
        store: RunStore | None = None,
        by: Sequence[str] = (),
        claimed: RunRecord | None = None,
        channel: str | None = None,
        thread: tuple[str, str] | None = None,
        stop_seen: str | None = None,
        within: Sequence[ChannelTools] = (),
    ) -> None:
        self.agent = agent
        self.channel = channel
        """The Slack channel the run talks in; with per-channel tool sets the model is offered,
        and a step may run, only that channel's tools. Once the run began, the channel its
        conversation keeps (`RunRecord.channel`)."""
        self.within = tuple(within)
        """For an agent used as a tool: the tool sets of its callers, which bound its own."""
        self.thread = thread
        self.stop_seen = stop_seen
        """The turn this run begins and the stop mark it began under (`Agent.__call__`)."""
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
        self.replayed_since: float | None = None
        """Set when an earlier attempt of this run had ended: the epoch seconds it began, so
        that a retry can look for the answer that attempt may have posted already."""
        self._chosen = run_id is not None
        """A caller-chosen id may name an earlier attempt of this run, saved in the store."""
        self._started = False
        self._closing = False
        """The pause or end of the run is being saved: a cancellation must not undo it."""
        self._stopping = False
        """The run's task was cancelled and the run is saving itself stopped."""
        self.stopped_calls: list[StoppedCall] = []
        """When the run was stopped, what became of each call of the step it was in: the
        thread says whether each tool ran, was stopped before it ran, or was interrupted."""
        self._resumed: RunRecord | None = None

    @property
    def stoppable(self) -> bool:
        """Whether cancelling the task that runs this run would still stop it: it is neither
        saving its stop already nor pausing or ending. One who stops a run cancels it again
        while this holds: on Python 3.11 a cancellation that lands inside a store call can be
        lost (`asyncio.wait_for` lets the call's result through), and the run goes on."""
        return not (self._stopping or self._closing or self.output is not None)

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
        if run.channel is not None:
            # The conversation's channel as stored decides its tools (`RunRecord.channel`).
            self.channel = run.channel
        self.requesters = list(run.requesters)
        _logging.bind(run_id=self.run_id)
        if begin.replay:
            # An earlier attempt paused or ended: its events, so that a retry can post the card
            # or the answer that the crashed attempt may not have posted.
            events, output = replayed(run, self.path)
            self.replayed_since = run.t0 / 1000
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
                if parent.nested:
                    await cancel_nested(self, store, parent, "superseded", parent.pending_calls)
                # Claimed for this run (a resume that won instead made the claim above raise,
                # and keeps the typed value), so the superseded call can never run: nothing
                # needs what a person typed in it. Scrubbed now, not at the end of this run,
                # which may pause again and never end.
                await scrub_command(store, parent, self.agent.tools)
            _metrics.RUNS_STARTED.labels(how=begin.how).inc()
            yield StartEvent(run_id=self.run_id, parent_id=self.parent_id, path=self.path)
            if begin.cancel_reason is not None:
                yield await self._cancel(store, run, begin.cancel_reason, run.pending_calls)
                return
            try:
                async for event in self._loop(store, journal, run, begin.durable, stream):
                    yield event
            except (StoreError, StartRefused):
                # The store failed, not the run: saving it `error` would need the store too,
                # and a retry with this run id continues from what the journal holds. (Or it
                # refused the start of its tools: the run is stopped, below.)
                raise
            except ModelCallError as exc:
                # The SDK's words are the whole story: one line, no traceback through the SDK.
                log.error("run %s of agent %s failed: %s", self.run_id, self.agent.name, exc)
                _clear_step(run)
                yield await self._finish(store, run, "error", reason="model", message=str(exc))
            except Exception as exc:
                # A model or runtime failure ends this run as `error`; it never leaves it unsaved.
                log.exception("run %s of agent %s failed", self.run_id, self.agent.name)
                _clear_step(run)
                message = f"{type(exc).__name__}: {exc}"
                yield await self._finish(store, run, "error", reason="exception", message=message)
        except asyncio.CancelledError:
            self._stopping = True
            await self._stop(journal, run)
            raise
        except StartRefused as refused:
            # Stopped in the store before its tools started: saved as a stop would save it.
            self._stopping = True
            await self._stop(journal, run)
            raise RunStopped(str(refused), run_id=run.run_id) from refused

    async def _loop(
        self, store: RunStore, journal: Journal, run: RunRecord, durable: bool, stream: bool
    ) -> AsyncIterator[Event]:
        agent = self.agent
        iterations = 0
        while True:
            if run.pending_calls:
                step = Step(
                    agent_name=self.path,
                    tools=self.offered(),
                    run=run,
                    journal=journal,
                    durable=durable,
                    channel=self.channel,
                    within=self.bounds(),
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
            replies = agent.model.respond(
                run.transcript,
                [tool.spec() for tool in self.offered().values()],
                stream=stream,
            )
            while True:
                try:
                    item = await anext(replies)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    if not from_sdk(exc):
                        raise  # a model's own fault: `exception`, with its traceback logged
                    # The SDK's words say what to fix: one line in the thread and the log, not
                    # a traceback through the SDK.
                    raise ModelCallError(describe_failure(agent.model.name, exc)) from exc
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

    def offered(self) -> dict[str, Tool]:
        """The tools this run is offered now, and the only ones a step of it may run."""
        return self.agent.tools_in(self.channel, self.within)

    def bounds(self) -> tuple[ChannelTools, ...]:
        """The tool sets an agent this run calls as a tool runs inside: its callers' and its
        own agent's."""
        own = self.agent.channels
        return self.within if own is None else (*self.within, own)

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
        self, store: RunStore, run: RunRecord, outcomes: list[Outcome]
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

    # How a run ends -----------------------------------------------------------------------

    async def _pause(self, store: RunStore, run: RunRecord, waiting: list[Outcome]) -> list[Event]:
        run.pending_calls = [o.call for o in waiting]
        run.interactions = [i for o in waiting for i in o.suspended]
        run.nested = {o.call.tool_call_id: o.nested for o in waiting if o.nested is not None}
        run.input_required = {
            o.call.tool_call_id: o.input_required for o in waiting if o.input_required is not None
        }
        keep = {iid for o in waiting for iid in o.used_answers}
        run.answers = {k: v for k, v in run.answers.items() if k in keep}
        run.results, run.started = {}, []
        # Saved before any interaction is emitted: a caller may stop iterating at the first one
        # and still resume with its id.
        output = await self._finish(store, run, "cancelled", reason="input_required", paused=True)
        return [*(InteractionEvent.of(run.run_id, self.path, i) for i in run.interactions), output]

    async def _cancel(
        self, store: RunStore, run: RunRecord, reason: str, still_open: list[PendingCall]
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
        store: RunStore,
        run: RunRecord,
        code: EventCode,
        *,
        reason: str | None = None,
        message: str | None = None,
        paused: bool = False,
    ) -> OutputEvent:
        run.t1 = now_ms()
        run.status = "paused" if paused else code
        run.reason, run.message = reason, message
        if code == "error":
            run.error = message
        self._closing = True
        await store.save_run(run)
        if not paused and self._resumed is not None:
            await scrub_command(store, self._resumed, self.agent.tools)
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
            self.stopped_calls = [
                StoppedCall(
                    tool_call_id=call.tool_call_id,
                    name=call.name,
                    outcome="ran"
                    if call.tool_call_id in run.results
                    else "interrupted"
                    if call.tool_call_id in run.started
                    else "not_started",
                )
                for call in run.pending_calls
            ]
            run.transcript += closing_results(
                run, started=INTERRUPTED_BY_STOP, not_started=INTERRUPTED_BY_STOP
            )
            _clear_step(run)
            run.t1 = now_ms()
            run.status, run.reason, run.message = "cancelled", "interrupted", STOPPED
        # Else the pause or end was being saved: save that again, it may not have landed.
        await journal.save_stopped()


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
    run.results, run.started, run.input_required = {}, [], {}


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
