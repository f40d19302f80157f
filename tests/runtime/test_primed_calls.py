"""A tool call is primed before the journal's "started" mark is written and begun right after
it is durable (`Tool.prime`): a sync handler's thread is started when primed and calls the
handler only once begun; a call dropped instead (the mark was refused or never written) never
calls its handler, and its thread ends."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from bot import Tool


def _threads(tool: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"handback-tool-{tool}"]


def _sync_tool(name: str, calls: list[str]) -> Tool:
    def handler(service: str) -> str:
        """Deploy."""
        calls.append(service)
        return f"deployed {service}"

    return Tool(handler, name=name)


async def test_a_primed_sync_call_has_its_thread_waiting_and_the_handler_not_called() -> None:
    calls: list[str] = []
    primed = _sync_tool("waits", calls).prime({"service": "api"}, contextvars.copy_context())
    (thread,) = _threads("waits")
    assert thread.is_alive() and calls == []
    task = primed.begin()
    assert await task == "deployed api"
    thread.join(10)
    assert calls == ["api"] and not thread.is_alive()


async def test_a_dropped_sync_call_never_calls_its_handler_and_its_thread_ends() -> None:
    calls: list[str] = []
    primed = _sync_tool("dropped", calls).prime({"service": "api"}, contextvars.copy_context())
    (thread,) = _threads("dropped")
    primed.drop()
    thread.join(10)
    assert not thread.is_alive() and calls == []
    with pytest.raises(RuntimeError, match="dropped already"):
        primed.begin()


async def test_a_begun_sync_call_runs_once_and_a_late_drop_changes_nothing() -> None:
    calls: list[str] = []
    primed = _sync_tool("once", calls).prime({"service": "api"}, contextvars.copy_context())
    task = primed.begin()
    primed.drop()  # as the step does for every call once the mark's save is over
    assert await task == "deployed api"
    assert calls == ["api"]
    with pytest.raises(RuntimeError, match="begun already"):
        primed.begin()


async def test_a_primed_async_call_runs_nothing_until_begun_then_its_first_segment_at_once() -> (
    None
):
    steps: list[str] = []
    gate = asyncio.Event()

    async def deploy(service: str) -> str:
        """Deploy."""
        steps.append(f"first {service}")
        await gate.wait()
        steps.append("rest")
        return "deployed"

    primed = Tool(deploy).prime({"service": "api"}, contextvars.copy_context())
    assert steps == [] and _threads("deploy") == []
    task = primed.begin()
    assert steps == ["first api"]  # no await between the mark's `then` and the first statement
    gate.set()
    assert await task == "deployed"
    assert steps == ["first api", "rest"]


async def test_a_dropped_async_call_never_creates_its_coroutine() -> None:
    steps: list[str] = []

    async def deploy() -> str:
        """Deploy."""
        steps.append("ran")
        return "deployed"

    primed = Tool(deploy).prime({}, contextvars.copy_context())
    # No coroutine is made before `begin()`: one made and dropped would warn "never awaited".
    primed.drop()
    with pytest.raises(RuntimeError, match="dropped already"):
        primed.begin()
    assert steps == []
