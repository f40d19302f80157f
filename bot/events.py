"""The events a run emits, as pydantic models that round-trip through JSON."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from state import PendingInteraction

__all__ = [
    "AnyEvent",
    "BaseEvent",
    "DeltaEvent",
    "InteractionEvent",
    "OutputEvent",
    "RunStatus",
    "StartEvent",
    "ToolEvent",
    "event_adapter",
]


class BaseEvent(BaseModel):
    type: str
    run_id: str
    path: str = ""


class StartEvent(BaseEvent):
    type: Literal["START"] = "START"
    parent_id: str | None = None


class DeltaEvent(BaseEvent):
    """A piece of text streamed from the model."""

    type: Literal["DELTA"] = "DELTA"
    text: str


class ToolEvent(BaseEvent):
    """A tool call of the run starts (`running`) or has its result (`done`, or `failed` for a
    result that says it did not happen: an error, a denial, an interruption, a cancellation)."""

    type: Literal["TOOL"] = "TOOL"
    tool_call_id: str
    name: str
    status: Literal["running", "done", "failed"]
    result: str | None = None


class InteractionEvent(BaseEvent):
    """A handler called `suspend()`: the seed's fields plus `run_id`.

    The fields besides `BaseEvent`'s are exactly `PendingInteraction`'s (a test holds them
    so), spelled out because they are the seed's public shape; the event is made from the
    interaction and gives it back (`of`, `interaction`), never copied field by field."""

    type: Literal["INTERACTION"] = "INTERACTION"
    t0: int
    interaction_id: str
    kind: str
    runnable_path: str
    runnable_name: str
    runnable_type: str
    tool_call_id: str | None
    payload: dict[str, Any]
    response_schema: dict[str, Any] | None = None

    @classmethod
    def of(cls, run_id: str, path: str, interaction: PendingInteraction) -> InteractionEvent:
        """The event of `interaction`, emitted by run `run_id` at `path`."""
        return cls(run_id=run_id, path=path, **_interaction_fields(interaction))

    @property
    def interaction(self) -> PendingInteraction:
        """The pending interaction the event is about."""
        return PendingInteraction(**_interaction_fields(self))


def _interaction_fields(source: object) -> dict[str, Any]:
    return {f.name: getattr(source, f.name) for f in fields(PendingInteraction)}


class RunStatus(BaseModel):
    """How a run ended. `reason` says why: for `cancelled`, `input_required` (paused, waiting for
    the interactions emitted before), `cancelled` (an answer was `Cancel`) or `interrupted` (the
    task running it was cancelled); for `error`, `model` (a model call failed: `message` says
    why in one line), `exception` or `max_iterations`."""

    code: Literal["success", "error", "cancelled"]
    reason: str | None = None
    message: str | None = None
    """The cancel reason, the error, or `the run was stopped`."""


class OutputEvent(BaseEvent):
    """The last event of every run."""

    type: Literal["OUTPUT"] = "OUTPUT"
    parent_id: str | None = None
    status: RunStatus
    input: Any = None
    output: Any = None
    error: str | None = None
    t0: int
    t1: int
    usage: dict[str, int] = Field(default_factory=dict)


AnyEvent = Annotated[
    StartEvent | DeltaEvent | ToolEvent | InteractionEvent | OutputEvent,
    Field(discriminator="type"),
]
event_adapter: TypeAdapter[AnyEvent] = TypeAdapter(AnyEvent)
"""Parses any event back from JSON: `event_adapter.validate_json(event.model_dump_json())`."""
