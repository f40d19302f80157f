"""A tool call begins when `Tool.start` returns: an async (or pure) handler's first segment runs
in the caller's callback, in the call's context, so a kill right after the journal's "started"
mark never leaves a call marked started that did not begin."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from bot import Tool, current_call, suspend

# The eager start and the handler's scope are the runtime's machinery, tested as a unit.
from bot._eager import eager_task
from bot._suspend import HandlerScope, Suspended, current_scope

_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="outside")


def _context(value: str) -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(_seen.set, value)
    return context


async def test_first_segment_runs_before_eager_task_returns() -> None:
    steps: list[str] = []
    gate = asyncio.Event()

    async def handler() -> str:
        steps.append("first")
        await gate.wait()
        steps.append("rest")
        return "done"

    task = eager_task(handler(), contextvars.copy_context())
    assert steps == ["first"]
    assert not task.done()
    gate.set()
    assert await task == "done"
    assert steps == ["first", "rest"]


async def test_handler_that_never_awaits_has_run_when_started() -> None:
    ran: list[int] = []

    async def handler() -> int:
        ran.append(7)
        return 7

    task = eager_task(handler(), contextvars.copy_context())
    assert ran == [7]
    assert await task == 7


async def test_exception_in_first_segment_is_the_tasks_exception() -> None:
    async def handler() -> None:
        raise ValueError("boom")

    task = eager_task(handler(), contextvars.copy_context())
    with pytest.raises(ValueError, match="boom"):
        await task


async def test_exception_after_first_await_is_the_tasks_exception() -> None:
    async def handler() -> None:
        await asyncio.sleep(0)
        raise KeyError("later")

    task = eager_task(handler(), contextvars.copy_context())
    with pytest.raises(KeyError, match="later"):
        await task


async def test_cancel_before_first_step_closes_the_coroutine_at_once() -> None:
    events: list[str] = []
    waited: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handler() -> None:
        try:
            events.append("began")
            await waited
            events.append("resumed")  # never: the task is cancelled first
        finally:
            events.append("finally")

    task = eager_task(handler(), contextvars.copy_context())
    task.cancel()  # before the task has taken a step of its own
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert events == ["began", "finally"]
    assert waited.cancelled()


async def test_cancel_after_first_step_reaches_the_handler_where_it_waits() -> None:
    events: list[str] = []
    waiting = asyncio.Event()

    async def handler() -> str:
        waiting.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            events.append("cancelled at the await")
            raise
        return "never"

    task = eager_task(handler(), contextvars.copy_context())
    await asyncio.sleep(0)  # the task takes its first step (hands back the sleep's future)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()
    assert events == ["cancelled at the await"]


async def test_handler_may_catch_the_cancellation_and_return() -> None:
    async def handler() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return "cleaned up"
        return "slept"

    task = eager_task(handler(), contextvars.copy_context())
    await asyncio.sleep(0)
    task.cancel()
    assert await task == "cleaned up"


async def test_every_segment_runs_in_the_given_context_and_the_callers_is_untouched() -> None:
    seen: list[str] = []

    async def handler() -> None:
        seen.append(_seen.get())
        _seen.set("set by the handler")
        await asyncio.sleep(0)
        seen.append(_seen.get())

    context = _context("the call's")
    task = eager_task(handler(), context)
    assert _seen.get() == "outside"
    await task
    assert seen == ["the call's", "set by the handler"]
    assert _seen.get() == "outside"
    assert context[_seen] == "set by the handler"


def _scope(answers: dict[str, Any] | None = None) -> HandlerScope:
    return HandlerScope(
        path="agent.deploy",
        name="deploy",
        tool_call_id="call_1",
        answers=answers or {},
        run_id="run-1",
    )


def _call_context(scope: HandlerScope) -> contextvars.Context:
    context = contextvars.copy_context()
    context.run(current_scope.set, scope)
    return context


async def test_tool_start_runs_the_async_handler_to_its_first_await_with_current_call() -> None:
    seen: list[str] = []
    gate = asyncio.Event()

    async def deploy(service: str) -> str:
        """Deploy."""
        seen.append(f"{current_call().idempotency_key} {service}")
        await gate.wait()
        seen.append(current_call().tool_call_id)
        return "deployed"

    task = Tool(deploy).start({"service": "api"}, _call_context(_scope()))
    assert seen == ["run-1:call_1 api"]
    gate.set()
    assert await task == "deployed"
    assert seen == ["run-1:call_1 api", "call_1"]


async def test_suspend_in_the_first_segment_ends_the_task_suspended() -> None:
    async def deploy() -> str:
        """Deploy."""
        suspend({"ask": "ok?"})
        return "never"

    task = Tool(deploy).start({}, _call_context(_scope()))
    with pytest.raises(Suspended) as paused:
        await task
    (interaction,) = paused.value.interactions
    assert interaction.tool_call_id == "call_1"


async def test_suspend_after_an_await_reads_the_calls_scope() -> None:
    async def deploy() -> str:
        """Deploy."""
        await asyncio.sleep(0)
        return f"answer {suspend({'ask': 'ok?'})}"

    scope = _scope()
    with pytest.raises(Suspended) as paused:
        await Tool(deploy).start({}, _call_context(scope))
    (interaction,) = paused.value.interactions
    answered = _scope({interaction.interaction_id: "yes"})
    assert await Tool(deploy).start({}, _call_context(answered)) == "answer yes"


async def test_pure_sync_handler_runs_inside_start() -> None:
    calls: list[str] = []

    def look(name: str) -> str:
        """Look."""
        calls.append(name)
        return name.upper()

    task = Tool(look, pure=True).start({"name": "x"}, _call_context(_scope()))
    assert calls == ["x"]
    assert await task == "X"


async def test_the_first_segment_runs_as_the_new_task() -> None:
    outer = asyncio.current_task()
    seen: list[asyncio.Task[Any] | None] = []

    async def handler() -> None:
        seen.append(asyncio.current_task())
        # A timeout entered in the first segment and left after an await belongs to one task.
        async with asyncio.timeout(60):
            await asyncio.sleep(0)
        seen.append(asyncio.current_task())

    task = eager_task(handler(), contextvars.copy_context())
    assert asyncio.current_task() is outer
    await task
    assert seen == [task, task]
