"""`FunctionModel`: an in-process scripted model for tests, benchmarks and demos."""

from __future__ import annotations

import inspect
import itertools
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ._errors import UsageError
from ._model import ModelResponse, ToolCall

__all__ = ["FunctionModel", "ScriptReply", "to_response"]

ScriptReply = str | list[dict[str, Any]]
"""The answer text, or tool calls `{"name": ..., "arguments": {...}}`; a call may give its own
`"id"`, as model servers that send `call_0` on every turn do."""

_prefix = os.urandom(4).hex()
_counter = itertools.count()


def _call_id() -> str:
    # Unique per call and cheap: a random per-process prefix plus a counter.
    return f"call_{_prefix}{next(_counter):08x}"


def to_response(reply: ScriptReply) -> ModelResponse:
    """Turn what a script returned into a model turn, with fresh tool call ids unless the
    script gave some."""
    if isinstance(reply, str):
        return ModelResponse(text=reply)
    if not isinstance(reply, list):
        raise UsageError(f"a scripted model must return str or a list of tool calls, got {reply!r}")
    calls = []
    for item in reply:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise UsageError(
                f"a scripted tool call must be {{'name': ..., 'arguments': ...}}: {item!r}"
            )
        arguments = item.get("arguments", {})
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        given = item.get("id")
        if given is not None and not isinstance(given, str):
            raise UsageError(f"a scripted tool call id must be a str: {item!r}")
        calls.append(ToolCall(id=given or _call_id(), name=item["name"], arguments=raw))
    return ModelResponse(tool_calls=calls)


class FunctionModel:
    """A model whose every turn is `fn(messages)`; sync or async."""

    def __init__(
        self,
        fn: Callable[[list[dict[str, Any]]], ScriptReply | Awaitable[ScriptReply]],
        name: str = "function",
    ) -> None:
        self.fn = fn
        self.name = name
        self.calls = 0
        """How many times the model was asked; tests use it to prove a step was not redone."""

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        self.calls += 1
        reply = self.fn(messages)
        if inspect.isawaitable(reply):
            reply = await reply
        response = to_response(reply)
        if stream and response.text:
            yield response.text
        yield response
