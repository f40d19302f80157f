"""What a handler sees of its run: `current_call()`, and a worker thread for sync handlers."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from pydantic import Field

from bot import CallContext, Tool, UsageError, current_call, suspend
from bot._tool import ArgumentsError
from state import Store

from .conftest import events_of, make_agent, script


def test_current_call_outside_a_handler() -> None:
    with pytest.raises(UsageError, match="outside a tool handler"):
        current_call()


async def test_current_call_in_sync_and_async_handlers(store: Store) -> None:
    seen: dict[str, CallContext] = {}

    def sync_tool() -> str:
        seen["sync"] = current_call()
        return "s"

    async def async_tool() -> str:
        seen["async"] = current_call()
        return "a"

    fn = script({"name": "sync_tool", "arguments": {}}, {"name": "async_tool", "arguments": {}})
    agent = make_agent(store, fn, [sync_tool, async_tool])
    await agent(prompt="x", run_id="ctx-1").collect()
    saved = await store.load_run("ctx-1")
    assert saved is not None
    ids = [c["id"] for c in saved.transcript[1]["tool_calls"]]
    assert seen["sync"] == CallContext(
        run_id="ctx-1", tool_call_id=ids[0], tool="sync_tool", idempotency_key=f"ctx-1:{ids[0]}"
    )
    assert seen["async"].tool == "async_tool" and seen["async"].tool_call_id == ids[1]
    assert seen["sync"].idempotency_key != seen["async"].idempotency_key
    with pytest.raises(AttributeError):
        seen["sync"].run_id = "other"  # type: ignore[misc]


async def test_the_key_names_the_run_that_executes_the_call(store: Store) -> None:
    keys: list[str] = []

    def deploy() -> str:
        keys.append(current_call().idempotency_key)
        return "ok"

    agent = make_agent(
        store, script({"name": "deploy", "arguments": {}}), [Tool(deploy, requires_approval=True)]
    )
    (p,), paused, _ = await events_of(agent(prompt="x"))
    await agent(parent_id=paused.run_id, resume={p.interaction_id: True}, run_id="ctx-2").collect()
    assert keys == [f"ctx-2:{p.tool_call_id}"]


async def test_a_blocking_sync_tool_leaves_the_event_loop_free(store: Store) -> None:
    release = threading.Event()
    ticks: list[int] = []

    def blocking() -> str:
        # Released by a task on the event loop: only possible if the loop keeps running.
        return "released" if release.wait(timeout=10) else "the loop was blocked"

    async def ticker() -> None:
        while len(ticks) < 5:
            ticks.append(1)
            await asyncio.sleep(0.001)
        release.set()

    agent = make_agent(store, script({"name": "blocking", "arguments": {}}), [blocking])
    ticking = asyncio.create_task(ticker())
    result = await agent(prompt="x").collect()
    await ticking
    assert result.output == "done: released" and len(ticks) == 5


async def test_suspend_from_a_sync_handler_in_its_worker_thread(store: Store) -> None:
    threads: list[str] = []

    def lookup() -> str:
        threads.append(threading.current_thread().name)
        return str(suspend({"q": "which host?"}))

    agent = make_agent(store, script({"name": "lookup", "arguments": {}}), [lookup])
    (p,), paused, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=paused.run_id, resume={p.interaction_id: "db1"}).collect()
    assert result.output == "done: db1"
    assert threading.main_thread().name not in threads


async def test_pure_tools_run_on_the_event_loop(store: Store) -> None:
    threads: list[Any] = []

    def note() -> str:
        threads.append(threading.current_thread())
        return "noted"

    agent = make_agent(store, script({"name": "note", "arguments": {}}), [Tool(note, pure=True)])
    await agent(prompt="x").collect()
    assert threads == [threading.current_thread()]


def _scale(
    service: Annotated[str, Field(pattern=r"^[a-z]+$")],
    replicas: Annotated[int, Field(ge=1, le=10)] = 1,
) -> str:
    """Scale a service."""
    return f"{service} x{replicas}"


def test_annotated_constraints_reach_the_schema_and_the_check() -> None:
    """`Annotated[str, Field(pattern=...)]` constrains the tool: in the schema the model and the
    command form see, and when the model's arguments are checked (the extras were once dropped)."""
    tool = Tool(_scale)
    properties = tool.parameters["properties"]
    assert properties["service"]["pattern"] == "^[a-z]+$"
    assert (properties["replicas"]["minimum"], properties["replicas"]["maximum"]) == (1, 10)
    assert tool.parse_arguments('{"service": "api", "replicas": 3}') == {
        "service": "api",
        "replicas": 3,
    }
    for bad in ('{"service": "API; rm -rf /"}', '{"service": "api", "replicas": 99}'):
        with pytest.raises(ArgumentsError):
            tool.parse_arguments(bad)
