"""Events rebuilt from a saved run: the cards of a paused run, and everything a retry replays."""

from __future__ import annotations

from typing import Literal, assert_never

from state import RunRecord

from .events import InteractionEvent, OutputEvent, StartEvent
from .events import RunStatus as EventStatus

__all__ = ["EventCode", "output_event", "replayed"]

EventCode = Literal["success", "error", "cancelled"]


def replayed(run: RunRecord, path: str) -> tuple[list[StartEvent | InteractionEvent], OutputEvent]:
    """The events of a run that paused or ended, as it emitted them (less the streamed text):
    the start and the interactions, then the output."""
    events: list[StartEvent | InteractionEvent] = [
        StartEvent(run_id=run.run_id, parent_id=run.parent_id, path=path)
    ]
    if run.status == "paused":
        events += [InteractionEvent.of(run.run_id, path, i) for i in run.interactions]
    return events, output_event(run, path)


def output_event(run: RunRecord, path: str) -> OutputEvent:
    """The `OutputEvent` of a run that paused or ended, from its record."""
    code: EventCode
    match run.status:
        case "success" | "error" | "cancelled":
            code = run.status
        case "paused" | "running":
            code = "cancelled"  # a paused run is `cancelled/input_required`
        case never:
            assert_never(never)
    message = run.message if run.message is not None or code != "error" else run.error
    return OutputEvent(
        run_id=run.run_id,
        parent_id=run.parent_id,
        path=path,
        status=EventStatus(code=code, reason=run.reason, message=message),
        input=run.input,
        output=run.output,
        error=run.error,
        t0=run.t0,
        t1=run.t1 if run.t1 is not None else run.t0,
        usage=dict(run.usage),
    )
