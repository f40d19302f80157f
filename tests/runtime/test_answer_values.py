"""What an answer may be: JSON data checked against the question's schema (formats too),
the approval's strict shape, and payloads big or odd enough to test the store."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest

from bot import (
    Cancel,
    InvalidResumeValue,
    Tool,
    suspend,
)
from bot.events import event_adapter
from state import Store

from .conftest import (
    events_of,
    make_agent,
    script,
)


async def test_non_json_answers_are_refused_and_json_ones_normalized(store: Store) -> None:
    seen: list[Any] = []

    def anything() -> str:
        seen.append(suspend({"q": "anything"}))
        return "ok"

    agent = make_agent(store, script({"name": "anything", "arguments": {}}), [anything])
    (p,), out, _ = await events_of(agent(prompt="x"))

    class Opaque:
        pass

    bad = [{1, 2}, Opaque(), math.nan, [math.inf], b"bytes", {"nested": Cancel()}]
    for value in bad:
        with pytest.raises(InvalidResumeValue, match="JSON data"):
            await agent(parent_id=out.run_id, resume={p.interaction_id: value}).collect()
    assert seen == []
    # A tuple and integer keys are JSON once encoded: the handler sees what the store keeps.
    await agent(parent_id=out.run_id, resume={p.interaction_id: ({1: "x"}, 2)}).collect()
    assert seen == [[{"1": "x"}, 2]]


async def test_tuple_answer_satisfies_an_array_schema(store: Store) -> None:
    def pick() -> str:
        answer = suspend({"q": "which?"}, response_schema={"type": "array", "minItems": 1})
        return f"{type(answer).__name__}:{answer}"

    agent = make_agent(store, script({"name": "pick", "arguments": {}}), [pick])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: ("api",)}).collect()
    assert result.output == "done: list:['api']"


async def test_huge_and_unicode_payloads_survive_the_store(store: Store) -> None:
    big = "ñandú 🦤 שלום " * 70_000  # about 1 MB of mixed scripts

    def show(title: str) -> str:
        return str(suspend({"title": title, "body": big, "emoji": "🚀"}, kind="ask_user"))

    agent = make_agent(store, script({"name": "show", "arguments": {"title": "Ünïcödé ✓"}}), [show])
    (p,), out, events = await events_of(agent(prompt="größe?"))
    for event in events:
        assert event_adapter.validate_json(event.model_dump_json()) == event
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.interactions[0].payload == p.payload
    assert saved.input == "größe?"
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "sí ✅"}).collect()
    assert result.output == "done: sí ✅"


async def test_suspend_payload_is_json_data(store: Store) -> None:
    when = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    def schedule() -> str:
        return str(suspend({"at": when, "hosts": ("a", "b")}))

    class Opaque:
        pass

    def broken() -> str:
        return str(suspend({"thing": Opaque()}))

    agent = make_agent(
        store,
        script({"name": "schedule", "arguments": {}}, {"name": "broken", "arguments": {}}),
        [schedule, broken],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload == {"at": "2030-01-02T03:04:05Z", "hosts": ["a", "b"]}
    assert event_adapter.validate_json(p.model_dump_json()) == p
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.interactions[0].payload == p.payload
    # An unstorable payload is the handler's error, reported to the model, not a lost run.
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "ok"}).collect()
    assert result.status.code == "success"
    assert "suspend() payload must be JSON data" in result.output


async def test_approval_answer_shape_is_strict(store: Store) -> None:
    def drop(table: str) -> str:
        return f"dropped {table}"

    agent = make_agent(
        store,
        script({"name": "drop", "arguments": {"table": "users"}}),
        [Tool(drop, requires_approval=True)],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    # An unknown key may be a typo of `approved`; refusing it is safer than guessing.
    for bad in [{"approved": True, "extra": 1}, {"reason": "ok"}, {"approved": "yes"}, "true"]:
        with pytest.raises(InvalidResumeValue):
            await agent(parent_id=out.run_id, resume={p.interaction_id: bad}).collect()
    result = await agent(
        parent_id=out.run_id, resume={p.interaction_id: {"approved": True, "reason": "ok"}}
    ).collect()
    assert result.output == "done: dropped users"


async def test_schema_formats_are_enforced_server_side(store: Store) -> None:
    """`format` is validated on resume (jsonschema with its format extras), not just advice."""

    def ask_site() -> str:
        return str(
            suspend(
                {"question": "Which URL?"},
                kind="ask_user",
                response_schema={"type": "string", "format": "uri"},
            )
        )

    agent = make_agent(store, script({"name": "ask_site", "arguments": {}}), [ask_site])
    (p,), out, _ = await events_of(agent(prompt="x"))
    with pytest.raises(InvalidResumeValue, match="uri"):
        await agent(parent_id=out.run_id, resume={p.interaction_id: "not a uri"}).collect()
    result = await agent(
        parent_id=out.run_id, resume={p.interaction_id: "https://example.com/x"}
    ).collect()
    assert result.output == "done: https://example.com/x"
