"""Scripted models and agents shared by the runtime tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def last_tool_results(messages: list[dict[str, Any]]) -> list[str]:
    """The tool results after the last assistant message."""
    results: list[str] = []
    for message in reversed(messages):
        if message["role"] != "tool":
            break
        results.insert(0, message["content"])
    return results


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
