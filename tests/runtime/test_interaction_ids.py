"""Interaction ids are scoped to the conversation, and runs paused before that (scheme 1, kept
in fixtures/ as the previous code saved them) still resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from bot import Tool
from bot.tools import ask_user
from state import RunRecord, Store

from .conftest import events_of, make_agent, script

FIXTURES = Path(__file__).parent / "fixtures"


def deploy(service: str, version: str) -> str:
    return f"deployed {service} {version}"


async def test_same_call_id_in_two_conversations_gets_two_ids(store: Store) -> None:
    # Model servers that number calls per response send `call_0` in every conversation.
    call = {"id": "call_0", "name": "ask_user", "arguments": {"question": "Which env?"}}
    agent = make_agent(store, script(call), [ask_user])
    (first,), one, _ = await events_of(agent(prompt="deploy"))
    (second,), two, _ = await events_of(agent(prompt="deploy"))
    assert first.tool_call_id == second.tool_call_id == "call_0"
    assert first.interaction_id != second.interaction_id
    # Each answer resumes its own conversation only.
    done = await agent(parent_id=two.run_id, resume={second.interaction_id: "prod"}).collect()
    assert done.output == "done: prod"
    done = await agent(parent_id=one.run_id, resume={first.interaction_id: "dev"}).collect()
    assert done.output == "done: dev"


async def test_ids_are_stable_along_a_conversation(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "q?"}}), [ask_user]
    )
    (p,), paused, _ = await events_of(agent(prompt="x"))
    first = await store.load_run(paused.run_id)
    assert first is not None and (first.root_id, first.id_scheme) == (paused.run_id, 2)
    await agent(parent_id=paused.run_id, resume={p.interaction_id: "y"}, run_id="ids-1").collect()
    child = await store.load_run("ids-1")
    assert child is not None and (child.root_id, child.id_scheme) == (paused.run_id, 2)


def _fixture(name: str) -> RunRecord:
    # Read as the stores read a record (pydantic over the dataclass, missing fields default).
    return TypeAdapter(RunRecord).validate_json((FIXTURES / f"{name}.json").read_text())


@pytest.mark.parametrize(
    ("name", "tool", "answer", "output"),
    [
        ("v1_paused_approval", "deploy", True, "done: deployed api 2.3"),
        ("v1_paused_ask_user", "ask_user", "prod", "done: prod"),
    ],
)
async def test_a_run_paused_before_the_upgrade_resumes(
    store: Store, name: str, tool: str, answer: Any, output: str
) -> None:
    record = _fixture(name)
    assert (record.id_scheme, record.root_id, record.started, record.results) == (1, None, [], {})
    await store.save_run(record)
    stored = await store.load_run(record.run_id)
    assert stored == record
    (interaction,) = record.interactions

    def fn(messages: list[dict[str, Any]]) -> Any:
        return "done: " + messages[-1]["content"]

    tools = [Tool(deploy, requires_approval=True), ask_user]
    agent = make_agent(store, fn, tools)
    resumed = agent(parent_id=record.run_id, resume={interaction.interaction_id: answer})
    pending, result, _ = await events_of(resumed)
    # The handler recomputed the old id and found its answer: it did not ask again.
    assert pending == [] and result.output == output
    child = await store.load_run(result.run_id)
    assert child is not None and child.id_scheme == 1 and child.root_id == record.run_id
    # The next turn of that thread uses the new scheme.
    later = await agent(prompt="thanks", parent_id=result.run_id).collect()
    saved = await store.load_run(later.run_id)
    assert saved is not None and saved.id_scheme == 2 and saved.root_id == record.run_id


def test_fixtures_are_the_format_of_before_the_upgrade() -> None:
    for path in FIXTURES.glob("v1_*.json"):
        data = json.loads(path.read_text())
        assert not {"root_id", "id_scheme", "started", "results", "message"} & set(data), path
