"""A pending question is one value from `suspend()` to the card: the run keeps a
`PendingInteraction`, its `InteractionEvent` carries exactly that value's fields, and the store's
`InteractionRecord` is that value plus where its card is. A field added to one and not the others
fails here."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from bot import Tool
from bot.events import BaseEvent, InteractionEvent, StartEvent, event_adapter
from bot.tools import ask_user
from state import InteractionRecord, PendingInteraction, Store

from ..conftest import interaction_of
from .conftest import (
    events_of,
    make_agent,
    script,
)

SEED_FIELDS = {
    "type",
    "t0",
    "interaction_id",
    "kind",
    "runnable_path",
    "runnable_name",
    "runnable_type",
    "tool_call_id",
    "payload",
    "response_schema",
}
"""The seed's `InteractionEvent`, which the spec pins (plus `run_id`, and `path` of every
event)."""

PENDING = PendingInteraction(
    interaction_id="int_0123456789abcdef",
    kind="approval",
    payload={"tool": "deploy", "arguments": {"service": "api"}, "tool_call_id": "call_1"},
    response_schema={"type": "boolean"},
    tool_call_id="call_1",
    runnable_path="lead.sre.deploy",
    runnable_name="deploy",
    runnable_type="Agent",
    t0=1_796_000_000_123,
)


def _default(name: str) -> Any:
    (spec,) = [f for f in fields(PendingInteraction) if f.name == name]
    return spec.default_factory() if spec.default_factory is not MISSING else spec.default


def test_the_sample_sets_every_field_of_the_interaction() -> None:
    # Otherwise a field added later would pass the round trips below at its default unseen.
    assert [f.name for f in fields(PENDING) if getattr(PENDING, f.name) == _default(f.name)] == []


def test_the_event_has_exactly_the_interactions_fields() -> None:
    pending = {f.name for f in fields(PendingInteraction)}
    base = set(BaseEvent.model_fields)
    assert set(InteractionEvent.model_fields) == pending | base
    assert set(InteractionEvent.model_fields) == SEED_FIELDS | {"run_id", "path"}


def test_an_interaction_goes_through_its_event_unchanged() -> None:
    event = InteractionEvent.of("run-1", "lead", PENDING)
    assert (event.run_id, event.path, event.type) == ("run-1", "lead", "INTERACTION")
    assert event.interaction == PENDING
    parsed = event_adapter.validate_json(event.model_dump_json())
    assert isinstance(parsed, InteractionEvent) and parsed.interaction == PENDING


def test_a_record_is_the_interaction_placed() -> None:
    record = InteractionRecord.placed(
        PENDING,
        run_id="run-1",
        channel="C1",
        thread_ts="1700000000.000100",
        requester="U1",
        requesters=["U1", "U2"],
        created_at=1_700_000_000.0,
        expires_at=1_700_003_600.0,
    )
    assert isinstance(record, PendingInteraction) and interaction_of(record) == PENDING
    assert (record.run_id, record.channel, record.thread_ts) == ("run-1", "C1", "1700000000.000100")
    assert (record.requester, record.requesters, record.status) == ("U1", ["U1", "U2"], "pending")
    # The event of a stored record is the event of its interaction.
    assert InteractionEvent.of("run-1", "lead", record) == InteractionEvent.of(
        "run-1", "lead", PENDING
    )


async def test_the_event_a_run_emits_is_the_interaction_it_saved(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "Which?"}}), [ask_user]
    )
    (event,), output, _ = await events_of(agent(prompt="go"))
    saved = await store.load_run(output.run_id)
    assert saved is not None and saved.interactions == [event.interaction]
    assert event.interaction.runnable_path == "assistant.ask_user" and event.interaction.t0 > 0
    # A retry replays the paused run's events from the record: the same event.
    replayed, _, _ = await events_of(agent(prompt="go", run_id=output.run_id))
    assert replayed == [event]


async def test_interaction_event_fields(store: Store) -> None:
    def deploy(service: str) -> str:
        return "deployed"

    agent = make_agent(
        store,
        script(
            {"name": "ask_user", "arguments": {"question": "when?"}},
            {"name": "deploy", "arguments": {"service": "api"}},
        ),
        [ask_user, Tool(deploy, requires_approval=True)],
    )
    _, out, events = await events_of(agent(prompt="x"))
    start = events[0]
    assert isinstance(start, StartEvent) and start.run_id == out.run_id
    saved = await store.load_run(out.run_id)
    assert saved is not None
    (assistant,) = [m for m in saved.transcript if m["role"] == "assistant"]
    call_ids = [c["id"] for c in assistant["tool_calls"]]
    question, approval = (e for e in events if isinstance(e, InteractionEvent))
    for event, name in [(question, "ask_user"), (approval, "deploy")]:
        assert event.type == "INTERACTION" and event.run_id == out.run_id
        assert event.path == "assistant"
        assert event.runnable_name == name
        assert event.runnable_path == f"assistant.{name}"
        assert event.runnable_type == "Tool"
        assert out.t0 <= event.t0 <= out.t1
        assert event.interaction_id.startswith("int_")
    assert [question.tool_call_id, approval.tool_call_id] == call_ids
    assert approval.payload["tool_call_id"] == approval.tool_call_id
    assert question.response_schema == {"type": "string", "minLength": 1}
