"""What a handler sees of its run: `current_call()`, a worker thread for sync handlers, an
async handler with an async model, and a handler that raises or suspends again after an answer."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from pydantic import Field

# The error a tool raises on arguments it cannot read (no public name of its own).
from bot import (
    ArgumentsError,
    CallContext,
    Tool,
    UnknownInteraction,
    UsageError,
    current_call,
    suspend,
)
from state import Store

from .conftest import (
    events_of,
    last_tool_results,
    make_agent,
    script,
)


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


async def test_async_handler_and_async_model(store: Store) -> None:
    async def lookup(host: str) -> str:
        await asyncio.sleep(0)  # the scope must survive an await
        answer = suspend({"host": host}, kind="ask_user")
        await asyncio.sleep(0)
        return f"{host}={answer}"

    async def fn(messages: list[dict[str, Any]]) -> Any:
        await asyncio.sleep(0)
        if messages[-1]["role"] == "user":
            return [{"name": "lookup", "arguments": {"host": "db1"}}]
        return "got " + last_tool_results(messages)[0]

    agent = make_agent(store, fn, [lookup])
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload == {"host": "db1"} and out.status.reason == "input_required"
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "up"}).collect()
    assert result.output == "got db1=up"


async def test_sync_suspend_from_a_worker_thread(store: Store) -> None:
    def blocking_part() -> str:
        return str(suspend({"q": "from a thread"}))

    async def threaded() -> str:
        # to_thread copies the context, so a blocking helper may suspend too.
        return await asyncio.to_thread(blocking_part)

    agent = make_agent(store, script({"name": "threaded", "arguments": {}}), [threaded])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "ok"}).collect()
    assert result.output == "done: ok"


async def test_handler_raises_after_its_answer(store: Store) -> None:
    def picky() -> str:
        answer = suspend({"q": "size?"})
        raise ValueError(f"cannot use {answer!r}")

    agent = make_agent(store, script({"name": "picky", "arguments": {}}), [picky])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "huge"}).collect()
    assert result.status.code == "success"
    assert result.output == "done: Error: tool `picky` failed: ValueError: cannot use 'huge'"


async def test_suspend_again_with_a_payload_built_from_the_first_answer(store: Store) -> None:
    seen: list[Any] = []

    def wizard() -> str:
        env = suspend({"q": "env?"}, kind="ask_user")
        seen.append(env)
        region = suspend({"q": f"region for {env}?"}, kind="ask_user")
        return f"{env}/{region}"

    agent = make_agent(store, script({"name": "wizard", "arguments": {}}), [wizard])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    (p2,), out2, _ = await events_of(
        agent(parent_id=out1.run_id, resume={p1.interaction_id: "prod"})
    )
    assert p2.payload == {"q": "region for prod?"} and p2.interaction_id != p1.interaction_id
    assert p2.tool_call_id == p1.tool_call_id
    saved = await store.load_run(out2.run_id)
    assert saved is not None and saved.answers == {p1.interaction_id: "prod"}
    # The first answer is not asked for again and not accepted again.
    with pytest.raises(UnknownInteraction):
        await agent(parent_id=out2.run_id, resume={p1.interaction_id: "dev"}).collect()
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "eu"}).collect()
    assert result.output == "done: prod/eu"
    assert seen == ["prod", "prod"]


async def test_approved_handler_that_then_suspends(store: Store) -> None:
    ran: list[str] = []

    def migrate(table: str) -> str:
        ran.append("start")
        mode = suspend({"q": f"how to migrate {table}?"}, kind="ask_user")
        return f"migrated {table} {mode}"

    agent = make_agent(
        store,
        script({"name": "migrate", "arguments": {"table": "users"}}),
        [Tool(migrate, requires_approval=True)],
    )
    (approval,), out1, _ = await events_of(agent(prompt="x"))
    (question,), out2, _ = await events_of(
        agent(parent_id=out1.run_id, resume={approval.interaction_id: True})
    )
    assert question.kind == "ask_user" and ran == ["start"]
    # The approval is kept along the chain: the second resume needs only the new answer.
    result = await agent(
        parent_id=out2.run_id, resume={question.interaction_id: "online"}
    ).collect()
    assert result.output == "done: migrated users online" and ran == ["start", "start"]
