"""A run's usage is the sum of its own model calls, streaming and not."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent
from bot.events import OutputEvent
from bot.testing import OpenAICompatServer
from bot.tools import ask_user
from state import Store

from .conftest import events_of


def _usage_of(fn: Any, messages: list[dict[str, Any]]) -> dict[str, int]:
    """What OpenAICompatServer reports for one request, recomputed from its inputs."""
    reply = fn(messages)
    text = reply if isinstance(reply, str) else ""
    prompt = sum(len(str(m.get("content") or "")) // 4 + 1 for m in messages)
    completion = len(text) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _sum(usages: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in usages:
        for key, value in usage.items():
            total[key] = total.get(key, 0) + value
    return total


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_usage_is_the_sum_of_this_runs_model_calls(
    store: Store, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    def lookup() -> str:
        return "a fairly long tool result " * 10

    def fn(messages: list[dict[str, Any]]) -> Any:
        tools = [m for m in messages if m["role"] == "tool"]
        if not tools:
            return [{"name": "ask_user", "arguments": {"question": "which?"}}]
        if len(tools) == 1:
            return [{"name": "lookup", "arguments": {}}]
        return "the final answer, in several words"

    async with OpenAICompatServer(fn) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        agent = Agent(name="a", model="openai/m", tools=[ask_user, lookup], store=store)

        async def run(**kw: Any) -> OutputEvent:
            call = agent(**kw)
            if stream:
                return (await events_of(call))[1]
            return await call.collect()

        paused = await run(prompt="x")
        assert paused.usage == _sum([_usage_of(fn, r["messages"]) for r in server.requests])
        saved = await store.load_run(paused.run_id)
        assert saved is not None and saved.usage == paused.usage
        before = len(server.requests)
        result = await run(
            parent_id=paused.run_id, resume={saved.interactions[0].interaction_id: "x"}
        )
        # Two model calls in the resumed run; the parent's call is billed to the parent only.
        assert len(server.requests) == before + 2
        assert result.usage == _sum(
            [_usage_of(fn, r["messages"]) for r in server.requests[before:]]
        )
        assert result.output == "the final answer, in several words"
