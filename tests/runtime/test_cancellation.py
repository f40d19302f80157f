"""Cancelling the task that runs a run ends it `cancelled / interrupted`, saved with what it did,
and the cancellation still reaches whoever cancelled it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from bot import Tool
from state import Store

from .conftest import events_of, last_tool_results, make_agent

STOPPED = "Interrupted: the run was stopped."


async def _cancel_when(entered: asyncio.Event, run: Awaitable[Any]) -> None:
    task = asyncio.ensure_future(run)
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


def _then_answer(first: Callable[[list[dict[str, Any]]], Any]) -> Callable[..., Any]:
    """A model that plays `first` on the first turn and then answers with what it sees."""
    turns: list[int] = []

    async def fn(messages: list[dict[str, Any]]) -> Any:
        turns.append(1)
        if len(turns) == 1:
            reply = first(messages)
            return await reply if asyncio.iscoroutine(reply) else reply
        user = [m["content"] for m in messages if m["role"] == "user"]
        # The results the last user message follows (a follow-up), or that end the transcript.
        tail = messages if messages[-1]["role"] == "tool" else messages[:-1]
        return f"{user[-1]}: " + " | ".join(last_tool_results(tail) or ["-"])

    return fn


@pytest.mark.parametrize("iterate", [False, True])
async def test_cancelled_mid_model_call(store: Store, iterate: bool) -> None:
    entered = asyncio.Event()

    async def hang(messages: list[dict[str, Any]]) -> Any:
        entered.set()
        await asyncio.Event().wait()

    agent = make_agent(store, _then_answer(hang), [])
    run = agent(prompt="hello", run_id="stop-model")
    await _cancel_when(entered, events_of(run) if iterate else run.collect())
    saved = await store.load_run("stop-model")
    assert saved is not None
    assert (saved.status, saved.reason, saved.message) == (
        "cancelled",
        "interrupted",
        "the run was stopped",
    )
    assert saved.transcript == [{"role": "user", "content": "hello"}]
    follow = await agent(prompt="again", parent_id="stop-model").collect()
    assert follow.status.code == "success" and follow.output == "again: -"


async def test_a_retry_finishes_a_run_stopped_mid_model_call(store: Store) -> None:
    entered = asyncio.Event()

    async def hang(messages: list[dict[str, Any]]) -> Any:
        entered.set()
        await asyncio.Event().wait()

    agent = make_agent(store, _then_answer(hang), [])
    await _cancel_when(entered, agent(prompt="hello", run_id="stop-retry").collect())
    again = await agent(prompt="hello", run_id="stop-retry").collect()
    assert again.status.code == "success" and again.output == "hello: -"
    saved = await store.load_run("stop-retry")
    assert saved is not None and (saved.status, saved.reason) == ("success", None)


async def test_cancelled_mid_tool(store: Store) -> None:
    entered = asyncio.Event()

    async def hang() -> str:
        # Stopped once the sibling's result is saved, so that the test knows what to expect.
        while True:
            saved = await store.load_run("stop-tool")
            if saved is not None and "quick result" in saved.results.values():
                break
            await asyncio.sleep(0.001)
        entered.set()
        await asyncio.Event().wait()
        return "never"

    def quick() -> str:
        return "quick result"

    def gated() -> str:
        return "never either"

    calls = [
        {"name": "hang", "arguments": {}},
        {"name": "quick", "arguments": {}},
        {"name": "gated", "arguments": {}},
    ]
    tools = [hang, quick, Tool(gated, requires_approval=True)]
    agent = make_agent(store, _then_answer(lambda messages: calls), tools)
    await _cancel_when(entered, agent(prompt="go", run_id="stop-tool").collect())
    saved = await store.load_run("stop-tool")
    assert saved is not None and saved.reason == "interrupted"
    assert saved.pending_calls == [] and saved.interactions == []
    # Every call has a result, so the transcript is valid for the model.
    assert last_tool_results(saved.transcript) == [STOPPED, "quick result", STOPPED]
    follow = await agent(prompt="and now?", parent_id="stop-tool").collect()
    assert follow.output == f"and now?: {STOPPED} | quick result | {STOPPED}"


async def test_cancelled_while_a_sync_tool_blocks_its_thread(store: Store) -> None:
    entered = asyncio.Event()
    release = threading.Event()
    loop = asyncio.get_running_loop()

    def blocking() -> str:
        loop.call_soon_threadsafe(entered.set)
        release.wait(timeout=30)
        return "late"

    calls = [{"name": "blocking", "arguments": {}}]
    agent = make_agent(store, _then_answer(lambda messages: calls), [blocking])
    try:
        await _cancel_when(entered, agent(prompt="go", run_id="stop-thread").collect())
    finally:
        release.set()
    saved = await store.load_run("stop-thread")
    assert saved is not None and saved.reason == "interrupted"
    assert last_tool_results(saved.transcript) == [STOPPED]


async def test_a_retry_finishes_a_stopped_resume(store: Store) -> None:
    """A worker that shuts down cancels its run to hand the work on: the retry of that work
    (the same run id) finishes the run without running the stopped call again."""
    entered = asyncio.Event()
    ran: list[str] = []

    async def deploy() -> str:
        ran.append("deploy")
        entered.set()
        await asyncio.Event().wait()
        return "never"

    calls = [{"name": "deploy", "arguments": {}}]
    agent = make_agent(
        store, _then_answer(lambda messages: calls), [Tool(deploy, requires_approval=True)]
    )
    (p,), paused, _ = await events_of(agent(prompt="go"))
    answer = {p.interaction_id: True}
    resume = agent(parent_id=paused.run_id, resume=answer, run_id="stop-resume")
    await _cancel_when(entered, resume.collect())
    saved = await store.load_run("stop-resume")
    assert saved is not None and saved.status == "cancelled" and saved.reason == "interrupted"
    assert last_tool_results(saved.transcript) == [STOPPED]

    again = await agent(parent_id=paused.run_id, resume=answer, run_id="stop-resume").collect()
    assert again.status.code == "success" and again.output == f"go: {STOPPED}"
    assert ran == ["deploy"]
    # Ended now: a further retry replays the end.
    assert (
        await agent(parent_id=paused.run_id, resume=answer, run_id="stop-resume").collect() == again
    )


async def test_the_cancellation_reaches_an_enclosing_timeout(store: Store) -> None:
    async def hang(messages: list[dict[str, Any]]) -> Any:
        await asyncio.Event().wait()

    agent = make_agent(store, hang, [])
    run = agent(prompt="x", run_id="stop-timeout")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await run.collect()
    saved = await store.load_run("stop-timeout")
    assert saved is not None and saved.reason == "interrupted"
