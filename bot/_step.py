"""One step of a run: the tool calls of the model's last turn, executed once, with their journal."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import to_jsonable_python

from state import (
    RULE_KEY,
    Approval,
    NestedRun,
    PendingCall,
    PendingInteraction,
    RunRecord,
    StopGuard,
    read_approval,
)

from ._channels import ChannelTools
from ._errors import ApprovalPolicyError
from ._journal import INTERRUPTED_BY_CRASH, Journal, StartRefused
from ._redact import redact, redact_schema
from ._suspend import Cancelled, HandlerScope, Suspended, current_scope
from ._tool import ArgumentsError, PrimedCall, Tool

__all__ = ["APPROVAL_SCHEMA", "Outcome", "Step"]

log = logging.getLogger("handback.agent")

_SHOWN_VALUE = 200
"""Characters of an edited value the model is shown, before and after."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"},
                # An approver's edit (`Approval(editable=True)`): the arguments to run with
                # instead, merged over the model's; secret-looking ones are never taken.
                "arguments": {"type": "object"},
                # A standing grant: its scope when given with this approval, or the id of the
                # grant this call was approved under (`bot.slack`).
                "grant": {"type": "string"},
                # Who approved, when the rule needed several (`Approval.count`).
                "approvers": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
    ]
}


@dataclass(kw_only=True)
class Outcome:
    """What became of one tool call in this step."""

    call: PendingCall
    result: str | None = None
    suspended: list[PendingInteraction] = field(default_factory=list)
    """What the call waits for: one interaction, or those of the agent it called (`nested`)."""
    nested: NestedRun | None = None
    input_required: dict[str, Any] | None = None
    """The input-required result of an MCP server the call waits on (`HandlerScope`)."""
    cancelled: str | None = None
    used_answers: list[str] = field(default_factory=list)
    ran: bool = False
    """Whether this step tried to make progress on it (a waiting call nobody answered did not)."""


@dataclass(kw_only=True)
class _Ready:
    """A call whose handler is about to run: its tool, validated arguments and scope."""

    outcome: Outcome
    tool: Tool
    arguments: dict[str, Any]
    scope: HandlerScope
    edits: Any = None
    """The arguments an approver's answer carries (an edit before approving), if any."""
    note: str = ""
    """Said before the tool's result: which arguments the approver changed."""


@dataclass(kw_only=True)
class Step:
    """Executes `run.pending_calls` once; the results are also kept in `run.results`."""

    agent_name: str
    tools: dict[str, Tool]
    run: RunRecord
    journal: Journal
    durable: bool
    """Whether the transcript holding these calls is in the store already (the parent of a
    resume, a journal), so that a retry of this run would execute these very calls again."""
    channel: str | None = None
    """The channel of the run: an agent a call runs as a tool runs in it too."""
    within: tuple[ChannelTools, ...] = ()
    """The tool sets such an agent runs inside (`AgentRun.bounds`)."""
    _outcomes: list[Outcome] = field(default_factory=list)
    _running: int = 0

    async def execute(self) -> list[Outcome]:
        carried = _waiting_by_call(self.run)
        self._outcomes = [self._classify(call, carried) for call in self.run.pending_calls]
        # Every call is prepared (tool found, arguments validated, approval policy read, gate
        # passed) before any handler runs: a policy that fails ends the run with no sibling
        # half-executed.
        ready = [r for o in self._outcomes if o.ran and (r := await self._prepare(o))]
        self._running = len([r for r in ready if not r.tool.pure])
        # Primed before the mark is written, begun right after it is durable: a sync handler's
        # thread is already running then, and is only woken (`PrimedCall`).
        primed = [_prime(r) for r in ready]
        calls: list[asyncio.Task[Any]] = []
        try:
            await self._journal_start(ready, lambda: calls.extend(p.begin() for p in primed))
            handlers = [self._run_handler(r, call) for r, call in zip(ready, calls, strict=True)]
            if len(handlers) == 1:
                await handlers[0]
            elif handlers:
                await asyncio.gather(*handlers)
        except BaseException:
            # Cancelled (a stop, a shutdown) or failed (the store): a call started but not yet
            # awaited would otherwise run on with nobody waiting for it.
            for call in calls:
                call.cancel()
            raise
        finally:
            # The mark was refused or never written (a stop, a failed store, a cancellation):
            # the threads of the calls that did not begin end without calling their handlers.
            for unbegun in primed:
                unbegun.drop()
        # Answers nobody used in this step belong to the calls that were not re-run.
        used = {iid for o in self._outcomes if o.ran for iid in o.used_answers}
        leftover = [iid for iid in self.run.answers if iid not in used]
        for outcome in self._outcomes:
            if not outcome.ran:
                outcome.used_answers = leftover
        return self._outcomes

    def _classify(self, call: PendingCall, carried: dict[str, list[PendingInteraction]]) -> Outcome:
        outcome = Outcome(call=call)
        saved = self.run.results.get(call.tool_call_id)
        waiting = carried.get(call.tool_call_id, [])
        tool = self.tools.get(call.name)
        if saved is not None:
            outcome.result = saved  # journaled by an earlier attempt: never run again
        elif waiting and not any(i.interaction_id in self.run.answers for i in waiting):
            # Nobody answered this one: do not re-run its handler just to pause again.
            outcome.suspended = waiting
            outcome.nested = self.run.nested.get(call.tool_call_id)
            outcome.input_required = self.run.input_required.get(call.tool_call_id)
        elif call.tool_call_id in self.run.started and not (tool and tool.idempotent):
            # It ran in a process that died before its result was saved: running it again could
            # do twice what it did; saying so lets the model (and the people) decide.
            self._resolve(outcome, INTERRUPTED_BY_CRASH)
        else:
            outcome.ran = True
        return outcome

    async def _prepare(self, outcome: Outcome) -> _Ready | None:
        """The call ready to run; None when it already has its result or waits for approval.

        Raises `ApprovalPolicyError` when the tool's policy cannot be read: that ends the run.
        """
        call = outcome.call
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(f"`{n}`" for n in self.tools) or "none"
            self._resolve(outcome, f"Error: there is no tool `{call.name}` (available: {names})")
            return None
        try:
            arguments = tool.parse_arguments(call.arguments)
        except ArgumentsError as exc:
            self._resolve(outcome, f"Error: invalid arguments for tool `{tool.name}`: {exc}")
            return None
        rule = await tool.approval_for(arguments)
        run = self.run
        scope = HandlerScope(
            path=f"{self.agent_name}.{tool.name}",
            name=tool.name,
            tool_call_id=call.tool_call_id,
            answers=run.answers,
            run_id=run.run_id,
            root_id=run.root_id if run.id_scheme >= 2 else None,
            store=self.journal.store,
            nested=run.nested.get(call.tool_call_id),
            input_required=run.input_required.get(call.tool_call_id),
            channel=self.channel,
            within=self.within,
        )
        ready = _Ready(outcome=outcome, tool=tool, arguments=arguments, scope=scope)
        if rule is not None and not (
            self._approved(ready, rule) and (ready.edits is None or await self._edit(ready, rule))
        ):
            outcome.used_answers = scope.used
            return None
        return ready

    def _approved(self, ready: _Ready, rule: Approval) -> bool:
        """The approval gate: a `suspend()` made before any handler code runs."""
        outcome, tool = ready.outcome, ready.tool
        payload = {
            "tool": tool.name,
            # JSON first, so that redaction also reaches into model-typed arguments.
            "arguments": redact(to_jsonable_python(ready.arguments, fallback=str), tool.redact),
            "tool_call_id": outcome.call.tool_call_id,
        }
        # For clients that build a form from the approval, and the rule people answer under;
        # left out of the id (see `suspend`): a rule changed by a deploy must not orphan a
        # paused request.
        shown = {
            "arguments_schema": redact_schema(tool.parameters, tool.redact),
            RULE_KEY: rule.to_json(),
            # Where the tool lives and why it is gated (an MCP server's tool), for the card.
            **tool.approval_context(),
        }
        try:
            decision = ready.scope.suspend(payload, "approval", APPROVAL_SCHEMA, unhashed=shown)
        except Suspended as pause:
            outcome.suspended = pause.interactions
            return False
        except Cancelled as cancel:
            outcome.cancelled = cancel.reason
            return False
        answer = read_approval(decision)
        ready.edits = answer.edits
        if not answer.approved:
            self._resolve(outcome, f"Denied: {answer.reason or 'no reason given'}")
        return answer.approved

    async def _edit(self, ready: _Ready, rule: Approval) -> bool:
        """Take the approver's edit of the arguments: merged over the model's (a secret-looking
        argument, shown redacted, always keeps the model's value), validated again, and under
        the same rule. Anything else fails closed: the call gets an error result and the tool
        does not run. The answer is stored, so a retry merges the same edit the same way."""
        outcome, tool, edits = ready.outcome, ready.tool, ready.edits

        def refuse(why: str) -> bool:
            self._resolve(
                outcome,
                f"Error: the approver edited the arguments of `{tool.name}`, but {why}; "
                "the tool did not run.",
            )
            return False

        if not rule.editable:
            return refuse("its approval rule does not let approvers edit them")
        if not isinstance(edits, dict):
            return refuse("the edit is not a JSON object")
        before = to_jsonable_python(ready.arguments, fallback=str)
        shown = redact(before, tool.redact)
        locked = {key for key in before if shown.get(key) != before[key]}
        try:
            raw = json.loads(outcome.call.arguments) if outcome.call.arguments.strip() else {}
        except json.JSONDecodeError:
            raw = None  # parsed once already in `_prepare`; cannot happen
        if not isinstance(raw, dict):
            return refuse("the model's arguments cannot be read again")
        merged = {**raw, **{key: value for key, value in edits.items() if key not in locked}}
        try:
            arguments = tool.parse_arguments(json.dumps(merged))
        except ArgumentsError as exc:
            return refuse(f"the edited arguments are not valid: {exc}")
        try:
            again = await tool.approval_for(arguments)
        except ApprovalPolicyError as exc:
            return refuse(f"the approval policy could not be read for them ({exc})")
        if again is not None and again != rule:
            # An approval given under one rule (one approver for staging, say) must not carry
            # a call that needs another (two for prod).
            return refuse("with the edited arguments the call needs a different approval")
        after = to_jsonable_python(arguments, fallback=str)
        changed = [key for key in after if before.get(key) != after[key]]
        if changed:
            was, now = redact(before, tool.redact), redact(after, tool.redact)
            listed = ", ".join(
                f"{key} {_shown(was.get(key))} -> {_shown(now[key])}" for key in changed
            )
            ready.note = f"The approver changed the arguments: {listed}.\n"
        ready.arguments = arguments
        return True

    async def _journal_start(self, ready: list[_Ready], start: Callable[[], None]) -> None:
        """Save the run `running` with the calls whose handlers may have side effects, and
        `start` them where the store learns the mark is durable (`Journal.save`, the store's
        `save_run(then=...)`: right after a commit made, or a Redis reply read, on the loop's
        thread): a call marked started did begin, and a call whose mark never reached the store
        is simply run by a retry.

        Pure handlers need no entry: run again, they do nothing new. Neither do idempotent ones
        when the store already holds these calls (a resume, a journal): a retry executes the
        same calls, and running them twice is what `idempotent` allows. After a fresh model turn
        the write is needed even then: a retry would otherwise ask the model again and run the
        other calls it gets, under other idempotency keys.
        """
        effectful = [r for r in ready if not r.tool.pure]
        started = self.run.started
        marked = [
            r.outcome.call.tool_call_id
            for r in effectful
            if r.outcome.call.tool_call_id not in started
        ]
        started += marked
        if not effectful or (self.durable and all(r.tool.idempotent for r in effectful)):
            start()
            return
        self.run.status = "running"
        # The started mark is written only while the run's turn is not stopped, checked by the
        # store in the same step: a resume that claimed before a stop never starts a tool after.
        guard = None
        if self.run.thread is not None:
            guard = StopGuard(
                run_id=self.run.run_id, channel=self.run.thread[0], thread_ts=self.run.thread[1]
            )
        begun = False

        def begin() -> None:
            nonlocal begun
            begun = True
            start()

        try:
            written = await self.journal.save(then=begin, stop=guard)
        except BaseException:
            # Cancelled (or the store failed) before the handlers began, even if the mark was
            # on its way and lands: the marks come out of the run, so that neither the stopped
            # run (what its thread is told) nor a record saved later calls them started.
            if not begun:
                for call_id in marked:
                    started.remove(call_id)
            raise
        if not written:
            for call_id in marked:
                started.remove(call_id)
            raise StartRefused(self.run.run_id)

    async def _run_handler(self, ready: _Ready, call: asyncio.Task[Any]) -> None:
        outcome, tool = ready.outcome, ready.tool
        try:
            self._resolve(outcome, ready.note + _as_text(await call))
        except Suspended as pause:
            outcome.suspended, outcome.nested = pause.interactions, pause.nested
            outcome.input_required = ready.scope.input_required
        except Cancelled as cancel:
            outcome.cancelled = cancel.reason
        except Exception as exc:
            log.warning("tool %s failed: %r", tool.name, exc)
            failed = f"Error: tool `{tool.name}` failed: {type(exc).__name__}: {exc}"
            self._resolve(outcome, ready.note + failed)
        finally:
            outcome.used_answers = ready.scope.used
        if not tool.pure:
            await self._journal_end(outcome)

    async def _journal_end(self, outcome: Outcome) -> None:
        """Save what became of a call with side effects, unless the next save does it anyway."""
        self._running -= 1
        if outcome.result is None:
            # It paused (or was cancelled) before any side effect, as `suspend()` must come
            # first: a retry may run it again.
            self.run.started.remove(outcome.call.tool_call_id)
        if self._running == 0 and any(
            o.suspended or o.cancelled is not None for o in self._outcomes
        ):
            # The last handler of a step that pauses or ends cancelled: the save of the paused
            # (or cancelled) run follows at once, with this result in it.
            return
        await self._save()

    async def _save(self) -> None:
        self.run.status = "running"
        await self.journal.save()

    def _resolve(self, outcome: Outcome, result: str) -> None:
        outcome.result = result
        self.run.results[outcome.call.tool_call_id] = result


def _prime(ready: _Ready) -> PrimedCall:
    """The call made ready, in a context of its own holding its scope (`suspend()`,
    `current_call()`)."""
    context = contextvars.copy_context()
    context.run(current_scope.set, ready.scope)
    return ready.tool.prime(ready.arguments, context)


def _waiting_by_call(run: RunRecord) -> dict[str, list[PendingInteraction]]:
    """The interactions each pending call waits for: its own (by their `tool_call_id`), or for a
    call to an agent, those of the inner run, whose `tool_call_id`s are the inner calls' ids and
    may repeat an outer one (a model server that sends `call_0` in every conversation)."""
    by_id = {i.interaction_id: i for i in run.interactions}
    waiting: dict[str, list[PendingInteraction]] = {}
    nested_ids: set[str] = set()
    for call_id, inner in run.nested.items():
        waiting[call_id] = [by_id[i] for i in inner.interaction_ids if i in by_id]
        nested_ids.update(inner.interaction_ids)
    for interaction in run.interactions:
        if interaction.interaction_id not in nested_ids and interaction.tool_call_id is not None:
            waiting.setdefault(interaction.tool_call_id, []).append(interaction)
    return waiting


def _shown(value: Any) -> str:
    """An argument's value as the model is told it changed: `'2.4'`, `3`, `["a"]`."""
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_VALUE else text[: _SHOWN_VALUE - 1] + "…"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        # pydantic models and dataclasses become JSON objects, not their repr.
        return json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
