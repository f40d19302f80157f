"""Scripted models and agents shared by the runtime tests."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from bot import Agent
from bot.events import InteractionEvent, OutputEvent
from bot.testing import FunctionModel
from state import Store


def last_tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results after the last assistant message."""
    results: list[str] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        results.insert(0, message["content"])
    return results


def assert_every_call_answered(messages: list[dict[str, Any]]) -> None:
    """What a hosted model insists on: every tool call has exactly one result, ids unique."""
    call_ids = [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(call_ids) == len(set(call_ids)), call_ids
    assert sorted(call_ids) == sorted(result_ids)


def script(
    *calls: dict[str, Any], answer: Callable[[list[str]], str] | None = None
) -> Callable[..., Any]:
    """A model that makes `calls` on a user turn and answers from tool results after."""

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return list(calls)
        results = last_tool_results(messages)
        return answer(results) if answer else "done: " + " | ".join(results)

    return fn


async def events_of(run: Any) -> tuple[list[InteractionEvent], OutputEvent, list[Any]]:
    """Every event of a run: its interactions, its one output (the last event), and all."""
    events = [event async for event in run]
    pending = [e for e in events if isinstance(e, InteractionEvent)]
    outputs = [e for e in events if isinstance(e, OutputEvent)]
    assert len(outputs) == 1 and events[-1] is outputs[0]
    return pending, outputs[0], events


def make_agent(store: Store, fn: Any, tools: list[Any], **kw: Any) -> Agent:
    return Agent(name="assistant", model=FunctionModel(fn), tools=tools, store=store, **kw)


class CountingStore:
    """A real store that records the name of each call made to it: one entry per round trip."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return await attr(*args, **kwargs)

        return call

    def take(self) -> list[str]:
        """The calls made since the last `take()`."""
        calls, self.calls = self.calls, []
        return calls


class Crash(BaseException):
    """Stands for the process dying where it is raised: nothing after it runs or is saved.

    A `BaseException`, like the kill it stands for, so no `except Exception:` handles it."""
