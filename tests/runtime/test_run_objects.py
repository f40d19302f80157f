"""A run object runs once, and stopping at its first interaction still saves the run."""

from __future__ import annotations

import pytest

from bot import (
    Agent,
    UsageError,
)
from bot.events import InteractionEvent
from bot.testing import FunctionModel
from bot.tools import ask_user, confirm
from state import Store

from .conftest import (
    events_of,
    make_agent,
    script,
)


async def test_a_run_object_runs_once(store: Store) -> None:
    calls: list[str] = []

    def act() -> str:
        calls.append("act")
        return "acted"

    model = FunctionModel(script({"name": "act", "arguments": {}}))
    agent = Agent(name="a", model=model, tools=[act], store=store)
    run = agent(prompt="x")
    events = [e async for e in run]
    # collect() after iterating gives that run's output; nothing runs again.
    assert await run.collect() is events[-1]
    assert await run.collect() is events[-1]
    assert calls == ["act"] and model.calls == 2
    with pytest.raises(UsageError, match="already started"):
        [e async for e in run]

    collected = agent(prompt="y")
    first = await collected.collect()
    assert await collected.collect() is first
    with pytest.raises(UsageError, match="already started"):
        collected.__aiter__()
    assert calls == ["act", "act"]


async def test_resume_run_object_collected_twice(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    run = agent(parent_id=out.run_id, resume={p.interaction_id: True})
    first = await run.collect()
    assert await run.collect() is first and first.status.code == "success"


async def test_stopping_at_the_first_interaction_still_saves_the_run(store: Store) -> None:
    call = {"name": "ask_user", "arguments": {"question": "q?"}}
    agent = make_agent(store, script(call, call), [ask_user])
    run = agent(prompt="x")
    iterator = run.__aiter__()
    first: InteractionEvent | None = None
    async for event in iterator:
        if isinstance(event, InteractionEvent):
            first = event
            break
    assert first is not None
    saved = await store.load_run(first.run_id)
    assert saved is not None and saved.status == "paused" and len(saved.interactions) == 2
    # The output is already known, and the caller may resume with the one id it saw.
    assert (await run.collect()).status.reason == "input_required"
    (second,), _, _ = await events_of(
        agent(parent_id=first.run_id, resume={first.interaction_id: "a"})
    )
    assert second.interaction_id == saved.interactions[1].interaction_id
    await iterator.aclose()  # type: ignore[attr-defined]
