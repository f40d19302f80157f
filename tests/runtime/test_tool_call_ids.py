"""Tool-call ids across steps: fresh for each call, and unique even from models that reuse or
omit them, so every call has exactly one result."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

# A model of its own (fixed or missing ids) speaks the runtime's model protocol.
from bot import Agent, ModelResponse, ToolCall
from bot.tools import ask_user
from state import Store

from .conftest import (
    assert_every_call_answered,
    events_of,
    last_tool_results,
    make_agent,
)


async def test_same_tool_in_consecutive_steps_gets_fresh_ids(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        answered = [m for m in messages if m["role"] == "tool"]
        if len(answered) < 2:
            return [{"name": "ask_user", "arguments": {"question": "Same question?"}}]
        return "answers: " + ", ".join(m["content"] for m in answered)

    agent = make_agent(store, fn, [ask_user])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    # Step 1 completes and the model asks the very same question again: a new call, a new id,
    # and the previous step's answer does not answer it.
    (p2,), out2, _ = await events_of(agent(parent_id=out1.run_id, resume={p1.interaction_id: "a"}))
    assert out2.status.reason == "input_required"
    assert p2.payload == p1.payload
    assert p2.tool_call_id != p1.tool_call_id
    assert p2.interaction_id != p1.interaction_id
    saved = await store.load_run(out2.run_id)
    assert saved is not None and saved.answers == {}
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "b"}).collect()
    assert result.output == "answers: a, b"


class FixedIdModel:
    """A server that sends `call_0` on every turn, or no id at all (some do both)."""

    name = "fixed-ids"

    def __init__(self, steps: list[list[tuple[str, dict[str, Any]]]], ids: list[str]) -> None:
        self.steps = steps
        self.ids = ids
        self.seen: list[list[dict[str, Any]]] = []

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        self.seen.append(list(messages))
        step = sum(1 for m in messages if m["role"] == "assistant")
        if step >= len(self.steps):
            yield ModelResponse(text=" | ".join(last_tool_results(messages)))
            return
        yield ModelResponse(
            tool_calls=[
                ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))
                for call_id, (name, arguments) in zip(self.ids, self.steps[step], strict=False)
            ]
        )


async def test_model_reusing_a_tool_call_id_across_steps(store: Store) -> None:
    question = ("ask_user", {"question": "Again?"})
    model = FixedIdModel([[question], [question]], ids=["call_0"])
    agent = Agent(name="assistant", model=model, tools=[ask_user], store=store)
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    (p2,), out2, _ = await events_of(agent(parent_id=out1.run_id, resume={p1.interaction_id: "a"}))
    assert p2.interaction_id != p1.interaction_id
    assert p2.tool_call_id != p1.tool_call_id
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "b"}).collect()
    assert result.output == "b"
    assert_every_call_answered(model.seen[-1])


async def test_model_sending_no_tool_call_ids(store: Store) -> None:
    question = ("ask_user", {"question": "Which?"})
    model = FixedIdModel([[question, question]], ids=["", ""])
    agent = Agent(name="assistant", model=model, tools=[ask_user], store=store)
    (a, b), out, _ = await events_of(agent(prompt="x"))
    assert a.tool_call_id and b.tool_call_id and a.tool_call_id != b.tool_call_id
    assert a.interaction_id != b.interaction_id
    result = await agent(
        parent_id=out.run_id, resume={a.interaction_id: "1", b.interaction_id: "2"}
    ).collect()
    assert result.output == "1 | 2"
    assert_every_call_answered(model.seen[-1])
