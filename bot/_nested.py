"""Nested agents: an `Agent` used as a tool of another agent.

The inner agent runs as a run of its own, saved in the caller's store under an id derived from the
caller's run and tool call (`nested_run_id`), with the caller's path in front of its own
(`outer.inner`, so its interactions say `outer.inner.tool` and their ids differ from the same
agent's at top level). When it pauses, the call pauses with every interaction the inner run waits
for, and the caller's record keeps which inner run that is (`RunRecord.nested`); resuming the
caller re-executes the call, which resumes the inner run with the answers meant for it. The inner
run keeps its transcript, and the handlers it finished are not run again. `Cancel` goes down:
cancelling the caller resumes each paused inner run with `Cancel` first.

The inner run is in the caller's channel and inside the caller's per-channel tool set: it is
offered, and may run, only those of its tools that the caller's set offers in that channel too
(by name or glob, or a server's name), so a channel's boundary holds at every depth.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import TYPE_CHECKING

from state import NestedRun, PendingCall, RunRecord, RunStore, StoreError

from ._errors import HandbackError, UsageError
from ._suspend import Cancel, Cancelled, Suspended, current_scope
from ._tool import ApprovalRule, Tool
from .events import InteractionEvent, OutputEvent

if TYPE_CHECKING:
    from ._agent import Agent
    from ._run import AgentRun

__all__ = ["AgentTool", "cancel_nested", "nested_run_id"]

log = logging.getLogger("handback.agent")

# The run ids `Agent.__call__` accepts; a derived id of another shape is hashed instead.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}")


def nested_run_id(run_id: str, tool_call_id: str) -> str:
    """The id of the inner run a call starts or resumes: the same on every retry of the calling
    run (a retry finds that inner run and continues or replays it), distinct for every call."""
    readable = f"{run_id}/{tool_call_id}"
    if _RUN_ID.fullmatch(readable):
        return readable
    digest = hashlib.sha256(f"{run_id}\x1f{tool_call_id}".encode()).hexdigest()[:32]
    return f"nested_{digest}"


class AgentTool(Tool):
    """An agent as a tool: the model sends a prompt, the inner agent's answer is the result.

    Idempotent by construction: the inner run's id is derived from the call, so running the call
    again continues, or replays, the same inner run instead of starting another.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        description: str | None = None,
        requires_approval: ApprovalRule = False,
    ) -> None:
        async def ask(prompt: str) -> str:
            return await self._ask(prompt)

        super().__init__(
            ask,
            name=agent.name,
            description=description
            or agent.description
            or f"Ask the agent `{agent.name}`; it answers in text.",
            requires_approval=requires_approval,
            idempotent=True,
            pure=False,
        )
        self.agent = agent
        self.parameters["properties"]["prompt"]["description"] = (
            f"What to ask `{agent.name}`, as a message to it"
        )

    def __repr__(self) -> str:
        return f"AgentTool({self.agent.name!r})"

    async def _ask(self, prompt: str) -> str:
        scope = current_scope.get()
        if scope is None or scope.store is None or scope.tool_call_id is None:
            raise UsageError(
                f"Agent `{self.agent.name}` runs as a tool only inside a run of another agent"
            )
        run_id = nested_run_id(scope.run_id, scope.tool_call_id)
        paused = scope.nested
        if paused is None:
            run = self.agent._nested_run(
                prompt=prompt,
                parent_id=None,
                resume=None,
                run_id=run_id,
                path=scope.path,
                store=scope.store,
                channel=scope.channel,
                within=scope.within,
            )
        else:
            answers = {i: scope.answers[i] for i in paused.interaction_ids if i in scope.answers}
            # Consumed by the inner run, which keeps them along its own chain.
            scope.used.extend(answers)
            run = self.agent._nested_run(
                prompt=None,
                parent_id=paused.run_id,
                resume=answers,
                run_id=run_id,
                path=scope.path,
                store=scope.store,
                channel=scope.channel,
                within=scope.within,
            )
        pending, output = await run._settled()
        return _result(self.agent.name, pending, output)


def _result(name: str, pending: list[InteractionEvent], output: OutputEvent) -> str:
    """The tool result of an inner run that ended; `Suspended` when it paused, `Cancelled` when
    it was cancelled (the caller ends cancelled too)."""
    status = output.status
    if status.code == "success":
        return "" if output.output is None else str(output.output)
    if status.reason == "input_required" and pending:
        raise Suspended(
            *(event.interaction for event in pending),
            nested=NestedRun(
                run_id=output.run_id, interaction_ids=[e.interaction_id for e in pending]
            ),
        )
    if status.code == "cancelled" and status.reason == "cancelled":
        raise Cancelled(status.message or "cancelled")
    return f"Error: agent `{name}` ended `{status.code}/{status.reason}`: {status.message}"


async def cancel_nested(
    caller: AgentRun, store: RunStore, run: RunRecord, reason: str, calls: list[PendingCall]
) -> None:
    """End `cancelled/cancelled` every inner run that one of `calls` paused on, as an answer
    `Cancel(reason)` to it would; each does the same to its own inner runs.

    The cancelling run's id is derived from the inner run's, so a retry of the caller finds it
    and replays it instead of cancelling twice. A refusal (the inner run was resumed by someone
    else or ended, or a deploy renamed the inner agent) is logged: the caller ends cancelled
    either way. A store failure is not a refusal: it propagates, and a retry cancels again.
    """
    for call in calls:
        inner = run.nested.get(call.tool_call_id)
        tool = caller.agent.tools.get(call.name)
        if inner is None or not inner.interaction_ids or not isinstance(tool, AgentTool):
            continue
        cancelling = tool.agent._nested_run(
            prompt=None,
            parent_id=inner.run_id,
            resume={inner.interaction_ids[0]: Cancel(reason)},
            run_id=nested_run_id(inner.run_id, "cancel"),
            path=f"{caller.path}.{tool.name}",
            store=store,
        )
        try:
            await cancelling._settled()
        except StoreError:
            raise
        except HandbackError as exc:
            log.warning("run %s: inner run %s not cancelled: %s", run.run_id, inner.run_id, exc)
