"""Continuing a conversation: from an error run, a success run and a run out of iterations,
with the system prompt once and `max_iterations` a budget per run."""

from __future__ import annotations

from typing import Any

from bot import Agent
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import Store

from .conftest import (
    assert_every_call_answered,
    events_of,
    make_agent,
)


async def test_continuation_from_an_error_run_and_from_a_success_run(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        assert_every_call_answered(messages)
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "boom":
            raise ConnectionError("model down")
        return "users: " + " / ".join(m["content"] for m in messages if m["role"] == "user")

    agent = make_agent(store, fn, [], system_prompt="be brief")
    failed = await agent(prompt="boom").collect()
    assert failed.status.code == "error"
    after_error = await agent(prompt="retry", parent_id=failed.run_id).collect()
    assert after_error.output == "users: boom / retry"
    # A finished run may be continued more than once: each continuation is its own branch.
    a = await agent(prompt="a", parent_id=after_error.run_id).collect()
    b = await agent(prompt="b", parent_id=after_error.run_id).collect()
    assert (a.output, b.output) == ("users: boom / retry / a", "users: boom / retry / b")


async def test_continuation_after_max_iterations_has_a_valid_transcript(store: Store) -> None:
    def again() -> str:
        return "again"

    def fn(messages: list[dict[str, Any]]) -> Any:
        assert_every_call_answered(messages)
        if messages[-1]["content"] == "stop":
            return "stopped"
        return [{"name": "again", "arguments": {}}]

    agent = make_agent(store, fn, [again], max_iterations=2)
    looped = await agent(prompt="loop").collect()
    assert looped.status.reason == "max_iterations"
    assert (await agent(prompt="stop", parent_id=looped.run_id).collect()).output == "stopped"


async def test_system_prompt_once_across_resumes_and_continuations(store: Store) -> None:
    seen: list[list[dict[str, Any]]] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        if messages[-1]["role"] == "user" and messages[-1]["content"].startswith("ask"):
            return [{"name": "ask_user", "arguments": {"question": "?"}}]
        return "ok"

    agent = make_agent(store, fn, [ask_user], system_prompt="You are terse.")
    (p,), out, _ = await events_of(agent(prompt="ask one"))
    resumed = await agent(parent_id=out.run_id, resume={p.interaction_id: "a"}).collect()
    (_,), paused, _ = await events_of(agent(prompt="ask two", parent_id=resumed.run_id))
    superseded = await agent(prompt="never mind", parent_id=paused.run_id).collect()
    await agent(prompt="thanks", parent_id=superseded.run_id).collect()
    assert len(seen) == 5
    for messages in seen:
        systems = [m for m in messages if m["role"] == "system"]
        assert systems == [{"role": "system", "content": "You are terse."}]
        assert messages[0] == systems[0]


async def test_max_iterations_is_a_budget_per_run(store: Store) -> None:
    def spin() -> str:
        return "spun"

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": "ask_user", "arguments": {"question": "go?"}}]
        return [{"name": "spin", "arguments": {}}]

    model = FunctionModel(fn)
    agent = Agent(name="a", model=model, tools=[ask_user, spin], store=store, max_iterations=2)
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert model.calls == 1
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "yes"}).collect()
    # The resumed run gets its own two model calls; the parent's call is not counted.
    assert result.status.reason == "max_iterations" and model.calls == 3
    assert "after 2 model calls" in (result.status.message or "")
