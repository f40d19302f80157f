"""`Agent`: the model/tool loop that pauses on `suspend()` and resumes from the store."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_core import to_jsonable_python

from state import PendingCall, PendingInteraction, RunRecord, RunStatus, Store, open_store

from ._errors import (
    RunAlreadyResumed,
    RunNotFound,
    RunNotPaused,
    UnknownInteraction,
    UsageError,
)
from ._model import Model, ModelResponse, ToolCall, resolve_model
from ._redact import redact
from ._schema import check_answer
from ._suspend import Cancel, Cancelled, HandlerScope, Suspended, current_scope
from ._tool import ArgumentsError, Tool, as_tool
from .events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent
from .events import RunStatus as EventStatus

__all__ = ["APPROVAL_SCHEMA", "Agent", "AgentRun"]

log = logging.getLogger("handback.agent")

APPROVAL_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
            "required": ["approved"],
            "additionalProperties": False,
        },
    ]
}
SUPERSEDED = "Superseded: the user did not answer and sent a new message instead."


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
    ) -> None:
        if not name or not isinstance(name, str):
            raise UsageError(f"Agent name must be a non-empty string, got {name!r}")
        if max_iterations < 1:
            raise UsageError(f"max_iterations must be at least 1, got {max_iterations!r}")
        self.name = name
        self.model = resolve_model(model)
        self.tools: dict[str, Tool] = {}
        for item in tools:
            tool = as_tool(item)
            if tool.name in self.tools:
                raise UsageError(f"Agent `{name}` has two tools named `{tool.name}`")
            self.tools[tool.name] = tool
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.store: Store | None = store
        """Where runs are saved; None opens `HANDBACK_STORE` (default SQLite) on first use."""
        self._tool_specs = [tool.spec() for tool in self.tools.values()]
        self._owned = AsyncExitStack()
        self._store_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Agent({self.name!r}, tools={list(self.tools)!r})"

    def __call__(
        self,
        prompt: str | None = None,
        parent_id: str | None = None,
        resume: dict[str, Any] | None = None,
    ) -> AgentRun:
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
        if prompt is not None and not isinstance(prompt, str):
            raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
        return AgentRun(self, prompt=prompt, parent_id=parent_id, resume=resume)

    async def get_store(self) -> Store:
        if self.store is None:
            async with self._store_lock:
                if self.store is None:
                    self.store = await self._owned.enter_async_context(open_store(None))
        return self.store

    async def aclose(self) -> None:
        """Close the store this agent opened itself (a store passed in is the caller's)."""
        await self._owned.aclose()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@dataclass(kw_only=True)
class _Outcome:
    """What became of one tool call in this step."""

    call: PendingCall
    result: str | None = None
    suspended: PendingInteraction | None = None
    cancelled: str | None = None
    used_answers: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class _Prepared:
    """A call ready to execute: its tool, validated arguments, and whether it needs approval."""

    tool: Tool
    arguments: dict[str, Any]
    gated: bool


class AgentRun:
    """One call of an agent: iterate it for events, or `await .collect()` for the output."""

    def __init__(
        self,
        agent: Agent,
        *,
        prompt: str | None,
        parent_id: str | None,
        resume: dict[str, Any] | None,
    ) -> None:
        self.agent = agent
        self.prompt = prompt
        self.parent_id = parent_id
        self.resume = resume
        self.run_id = "run_" + uuid.uuid4().hex
        self.output: OutputEvent | None = None
        self._started = False

    def __aiter__(self) -> AsyncIterator[StartEvent | DeltaEvent | InteractionEvent | OutputEvent]:
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

    def _start(self) -> None:
        # Running twice would execute the tools again and overwrite the saved run of this id.
        if self._started:
            raise UsageError(
                f"Run `{self.run_id}` was already started; call the agent again for a new run"
            )
        self._started = True

    # The run itself ------------------------------------------------------------------------

    async def _events(
        self, *, stream: bool
    ) -> AsyncIterator[StartEvent | DeltaEvent | InteractionEvent | OutputEvent]:
        agent = self.agent
        store = await agent.get_store()
        run = RunRecord(
            run_id=self.run_id,
            parent_id=self.parent_id,
            agent_name=agent.name,
            status="success",
            input=self.prompt,
            t0=_now_ms(),
        )
        carried: dict[str, PendingInteraction] = {}
        cancel_reason: str | None = None
        if self.parent_id is None:
            if agent.system_prompt:
                run.transcript.append({"role": "system", "content": agent.system_prompt})
            run.transcript.append({"role": "user", "content": self.prompt})
        else:
            parent = await store.load_run(self.parent_id)
            if parent is None:
                raise RunNotFound(f"No run `{self.parent_id}` in the store", run_id=self.parent_id)
            if self.resume is not None:
                if parent.agent_name != agent.name:
                    # Interaction ids include the agent's name, so another agent's handlers could
                    # never find these answers: they would ask again, forever.
                    raise UsageError(
                        f"Run `{parent.run_id}` belongs to agent `{parent.agent_name}`; "
                        f"agent `{agent.name}` cannot resume it"
                    )
                cancel_reason, accepted = await self._claim_for_resume(store, parent, self.resume)
                run.input = parent.input if self.prompt is None else self.prompt
                run.transcript = list(parent.transcript)
                run.pending_calls = list(parent.pending_calls)
                run.answers = {**parent.answers, **accepted}
                carried = {i.tool_call_id or "": i for i in parent.interactions}
            else:
                run.transcript = list(parent.transcript)
                if parent.status == "paused":
                    await self._claim(store, parent)
                    run.transcript += [
                        _tool_message(c.tool_call_id, SUPERSEDED) for c in parent.pending_calls
                    ]
                run.transcript.append({"role": "user", "content": self.prompt})

        yield StartEvent(run_id=self.run_id, parent_id=self.parent_id, path=agent.name)
        if cancel_reason is not None:
            # Close every open call so that a follow-up can continue from a valid transcript.
            run.transcript += [
                _tool_message(c.tool_call_id, f"Cancelled: {cancel_reason}")
                for c in run.pending_calls
            ]
            run.pending_calls, run.answers = [], {}
            yield await self._finish(
                store, run, "cancelled", reason="cancelled", message=cancel_reason
            )
            return
        try:
            iterations = 0
            while True:
                if run.pending_calls:
                    outcomes = await self._run_calls(run, carried)
                    carried = {}
                    waiting = [o for o in outcomes if o.suspended is not None]
                    cancelled = next((o.cancelled for o in outcomes if o.cancelled), None)
                    for outcome in outcomes:
                        if outcome.result is not None:
                            run.transcript.append(
                                _tool_message(outcome.call.tool_call_id, outcome.result)
                            )
                    if cancelled is not None:
                        for outcome in outcomes:
                            if outcome.result is None:
                                run.transcript.append(
                                    _tool_message(
                                        outcome.call.tool_call_id, f"Cancelled: {cancelled}"
                                    )
                                )
                        run.pending_calls, run.answers = [], {}
                        yield await self._finish(
                            store, run, "cancelled", reason="cancelled", message=cancelled
                        )
                        return
                    if waiting:
                        async for event in self._pause(store, run, waiting):
                            yield event
                        return
                    run.pending_calls, run.answers = [], {}
                if iterations >= agent.max_iterations:
                    yield await self._finish(
                        store,
                        run,
                        "error",
                        reason="max_iterations",
                        message=f"Agent `{agent.name}` stopped after "
                        f"{agent.max_iterations} model calls",
                    )
                    return
                iterations += 1
                response: ModelResponse | None = None
                async for item in agent.model.respond(
                    run.transcript, agent._tool_specs, stream=stream
                ):
                    if isinstance(item, str):
                        yield DeltaEvent(run_id=self.run_id, path=agent.name, text=item)
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
        except Exception as exc:
            # A model or runtime failure ends this run as `error`; it never leaves it unsaved.
            log.exception("run %s of agent %s failed", self.run_id, agent.name)
            run.pending_calls, run.answers, run.interactions = [], {}, []
            yield await self._finish(
                store, run, "error", reason="exception", message=f"{type(exc).__name__}: {exc}"
            )

    async def _claim_for_resume(
        self, store: Store, parent: RunRecord, resume: dict[str, Any]
    ) -> tuple[str | None, dict[str, Any]]:
        """Check every answer, then claim the parent.

        Returns the cancel reason if one was given, and the other answers as JSON data.
        """
        self._check_paused(parent)
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
            if isinstance(value, Cancel):
                cancel = cancel or str(value.reason)
                continue
            accepted[iid] = check_answer(parent.run_id, interaction, value)
        await self._claim(store, parent)
        return cancel, accepted

    def _check_paused(self, parent: RunRecord) -> None:
        if parent.status != "paused":
            raise RunNotPaused(
                f"Run `{parent.run_id}` is not paused (status `{parent.status}`); "
                "only a paused run can be resumed",
                run_id=parent.run_id,
                status=parent.status,
            )
        if parent.resumed_by is not None:
            raise _already(parent.run_id, parent.resumed_by)

    async def _claim(self, store: Store, parent: RunRecord) -> None:
        self._check_paused(parent)
        claim = await store.claim_run(parent.run_id, child_id=self.run_id)
        if not claim.won:
            if claim.run is None:
                raise RunNotFound(f"No run `{parent.run_id}` in the store", run_id=parent.run_id)
            if claim.run.status != "paused":
                self._check_paused(claim.run)
            raise _already(parent.run_id, claim.run.resumed_by)

    async def _run_calls(
        self, run: RunRecord, carried: dict[str, PendingInteraction]
    ) -> list[_Outcome]:
        """Execute the calls that can make progress; calls still waiting keep their interaction."""
        outcomes: list[_Outcome] = []
        runnable: list[_Outcome] = []
        for call in run.pending_calls:
            outcome = _Outcome(call=call)
            waiting = carried.get(call.tool_call_id)
            if waiting is not None and waiting.interaction_id not in run.answers:
                # Nobody answered this one: do not re-run its handler just to pause again.
                outcome.suspended = waiting
            else:
                runnable.append(outcome)
            outcomes.append(outcome)
        # Every call is prepared (tool found, arguments validated, approval policy read) before
        # any handler runs: a policy that fails ends the run with no sibling half-executed.
        ready = [(o, await self._prepare(o)) for o in runnable]
        calls = [self._execute(o, prepared, run.answers) for o, prepared in ready if prepared]
        if len(calls) == 1:
            await calls[0]
        elif calls:
            await asyncio.gather(*calls)
        # Answers nobody used in this step belong to the calls that were not re-run.
        used = {iid for o in runnable for iid in o.used_answers}
        leftover = [iid for iid in run.answers if iid not in used]
        for outcome in outcomes:
            if outcome not in runnable:
                outcome.used_answers = leftover
        return outcomes

    async def _prepare(self, outcome: _Outcome) -> _Prepared | None:
        """The call's tool, arguments and gate; None when the call already has its result.

        Raises `ApprovalPolicyError` when the tool's policy cannot be read: that ends the run.
        """
        agent = self.agent
        call = outcome.call
        tool = agent.tools.get(call.name)
        if tool is None:
            names = ", ".join(f"`{n}`" for n in agent.tools) or "none"
            outcome.result = f"Error: there is no tool `{call.name}` (available: {names})"
            return None
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            outcome.result = f"Error: invalid arguments for tool `{tool.name}`: {exc}"
            return None
        gated = await tool.needs_approval(arguments)
        return _Prepared(tool=tool, arguments=arguments, gated=gated)

    async def _execute(
        self, outcome: _Outcome, prepared: _Prepared, answers: dict[str, Any]
    ) -> None:
        agent = self.agent
        call = outcome.call
        tool, arguments = prepared.tool, prepared.arguments
        scope = HandlerScope(
            path=f"{agent.name}.{tool.name}",
            name=tool.name,
            tool_call_id=call.tool_call_id,
            answers=answers,
        )
        token = current_scope.set(scope)
        try:
            if prepared.gated:
                decision = scope.suspend(
                    {
                        "tool": tool.name,
                        # JSON first, so that redaction also reaches into model-typed arguments.
                        "arguments": redact(to_jsonable_python(arguments, fallback=str)),
                        "tool_call_id": call.tool_call_id,
                    },
                    "approval",
                    APPROVAL_SCHEMA,
                )
                approved, reason = _decision(decision)
                if not approved:
                    outcome.result = f"Denied: {reason}"
                    return
            value = tool.handler(**arguments)
            if inspect.isawaitable(value):
                value = await value
            outcome.result = _as_text(value)
        except Suspended as pause:
            outcome.suspended = pause.interaction
        except Cancelled as cancel:
            outcome.cancelled = cancel.reason
        except Exception as exc:
            log.warning("tool %s failed: %r", tool.name, exc)
            outcome.result = f"Error: tool `{tool.name}` failed: {type(exc).__name__}: {exc}"
        finally:
            outcome.used_answers = scope.used
            current_scope.reset(token)

    async def _pause(
        self, store: Store, run: RunRecord, waiting: list[_Outcome]
    ) -> AsyncIterator[InteractionEvent | OutputEvent]:
        run.status, run.reason = "paused", "input_required"
        run.pending_calls = [o.call for o in waiting]
        run.interactions = [o.suspended for o in waiting if o.suspended is not None]
        keep = {iid for o in waiting for iid in o.used_answers}
        run.answers = {k: v for k, v in run.answers.items() if k in keep}
        # Saved before any interaction is emitted: a caller may stop iterating at the first one
        # and still resume with its id.
        output = await self._finish(store, run, "cancelled", reason="input_required", paused=True)
        for interaction in run.interactions:
            yield InteractionEvent(
                run_id=self.run_id,
                path=self.agent.name,
                t0=interaction.t0,
                interaction_id=interaction.interaction_id,
                kind=interaction.kind,
                runnable_path=interaction.runnable_path,
                runnable_name=interaction.runnable_name,
                runnable_type=interaction.runnable_type,
                tool_call_id=interaction.tool_call_id,
                payload=interaction.payload,
                response_schema=interaction.response_schema,
            )
        yield output

    async def _finish(
        self,
        store: Store,
        run: RunRecord,
        code: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        paused: bool = False,
    ) -> OutputEvent:
        run.t1 = _now_ms()
        status: RunStatus = "paused" if paused else code  # type: ignore[assignment]
        run.status = status
        run.reason = reason
        if code == "error":
            run.error = message
        await store.save_run(run)
        self.output = OutputEvent(
            run_id=run.run_id,
            parent_id=run.parent_id,
            path=self.agent.name,
            status=EventStatus(code=code, reason=reason, message=message),  # type: ignore[arg-type]
            input=run.input,
            output=run.output,
            error=run.error,
            t0=run.t0,
            t1=run.t1,
            usage=dict(run.usage),
        )
        return self.output


def _already(run_id: str, resumed_by: str | None) -> RunAlreadyResumed:
    return RunAlreadyResumed(
        f"Run `{run_id}` was already resumed by run `{resumed_by}`",
        run_id=run_id,
        resumed_by=resumed_by,
    )


def _decision(answer: Any) -> tuple[bool, str]:
    if isinstance(answer, dict):
        return bool(answer.get("approved")), str(answer.get("reason") or "no reason given")
    return bool(answer), "no reason given"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        # pydantic models and dataclasses become JSON objects, not their repr.
        return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


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


def _tool_message(tool_call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}
