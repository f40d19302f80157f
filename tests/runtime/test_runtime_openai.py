"""The real `openai` client against a local OpenAI-compatible server, streaming and not."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent, Tool, suspend
from bot.events import DeltaEvent, InteractionEvent, OutputEvent
from bot.testing import OpenAICompatServer
from bot.tools import ask_user

from ..conftest import UNCLOSED_FAILS
from .conftest import last_tool_results

pytestmark = UNCLOSED_FAILS


def database_script(messages: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return [
            {
                "name": "ask_user",
                "arguments": {"question": "Which database?", "options": ["postgres", "mysql"]},
            }
        ]
    return f"Setting up {last_tool_results(messages)[0]} now."


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, store_url: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
    monkeypatch.setenv("HANDBACK_STORE", store_url)


async def test_seed_example_runs_as_written(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with OpenAICompatServer(database_script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        # ---- the seed's example, with `timbal` replaced by `bot` ----
        from bot import Agent
        from bot.events import InteractionEvent, OutputEvent
        from bot.tools import ask_user

        agent = Agent(name="assistant", model="openai/gpt-5", tools=[ask_user])

        pending = []
        final = None
        async for event in agent(prompt="set up my database"):
            if isinstance(event, InteractionEvent):
                pending.append(event)
            if isinstance(event, OutputEvent) and event.path == "assistant":
                final = event

        assert pending[0].kind == "ask_user"
        assert pending[0].payload == {
            "question": "Which database?",
            "options": ["postgres", "mysql"],
        }

        result = await agent(
            prompt="set up my database",
            parent_id=final.run_id,  # type: ignore[union-attr]
            resume={pending[0].interaction_id: "postgres"},
        ).collect()
        # ---- end of the seed's example ----
        assert result.status.code == "success"
        assert result.output == "Setting up postgres now."
        assert server.requests[-1]["model"] == "gpt-5"
        tool_message = server.requests[-1]["messages"][-1]
        assert tool_message == {
            "role": "tool",
            "tool_call_id": pending[0].tool_call_id,
            "content": "postgres",
        }
        await agent.aclose()


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_full_cycle_with_parallel_tool_calls(
    openai_env: None, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    deployed: list[str] = []

    def deploy(service: str, version: str) -> str:
        deployed.append(f"{service}@{version}")
        return f"{service} {version} is live"

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [
                {"name": "deploy", "arguments": {"service": "api", "version": "2.3"}},
                {
                    "name": "ask_user",
                    "arguments": {"question": "Also restart the cache?", "options": ["yes", "no"]},
                },
            ]
        return "All done: " + "; ".join(last_tool_results(messages))

    async with OpenAICompatServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        async with Agent(
            name="ops",
            model="openai/local-model",
            tools=[Tool(deploy, requires_approval=True), ask_user],
        ) as agent:
            events = []
            run = agent(prompt="deploy api 2.3")
            if stream:
                events = [e async for e in run]
                output = events[-1]
            else:
                output = await run.collect()
            assert isinstance(output, OutputEvent)
            assert output.status.reason == "input_required"
            assert output.usage["total_tokens"] > 0
            loaded = await (await agent.get_store()).load_run(output.run_id)
            assert loaded is not None
            pending = {i.kind: i for i in loaded.interactions}
            assert set(pending) == {"approval", "ask_user"}
            assert pending["approval"].payload["arguments"] == {"service": "api", "version": "2.3"}
            if stream:
                assert [e.kind for e in events if isinstance(e, InteractionEvent)] == [
                    "approval",
                    "ask_user",
                ]
            assert deployed == []

            resume = {
                pending["approval"].interaction_id: True,
                pending["ask_user"].interaction_id: "no",
            }
            run = agent(parent_id=output.run_id, resume=resume)
            if stream:
                events = [e async for e in run]
                assert (
                    "".join(e.text for e in events if isinstance(e, DeltaEvent))
                    == events[-1].output
                )
                result = events[-1]
            else:
                result = await run.collect()
            assert result.status.code == "success"
            assert result.output == "All done: api 2.3 is live; no"
            assert deployed == ["api@2.3"]
            assert len(server.requests) == 2
            assert all(r.get("stream", False) is stream for r in server.requests)
            assert [t["function"]["name"] for t in server.requests[0]["tools"]] == [
                "deploy",
                "ask_user",
            ]


async def test_handler_suspend_over_openai(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ask_age() -> int:
        """Ask the user for their age."""
        return int(
            suspend(
                {"question": "How old are you?"},
                kind="ask_user",
                response_schema={"type": "integer", "minimum": 0, "maximum": 130},
            )
        )

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": "ask_age", "arguments": {}}]
        return f"You are {last_tool_results(messages)[0]}."

    async with OpenAICompatServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        async with Agent(name="a", model="openai/m", tools=[ask_age]) as agent:
            events = [e async for e in agent(prompt="hi")]
            (p,) = [e for e in events if isinstance(e, InteractionEvent)]
            assert p.response_schema == {"type": "integer", "minimum": 0, "maximum": 130}
            result = await agent(
                parent_id=events[-1].run_id, resume={p.interaction_id: 41}
            ).collect()
            assert result.output == "You are 41."


async def test_model_server_error_ends_run_as_error(
    openai_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on discard
    monkeypatch.setenv("OPENAI_MAX_RETRIES", "0")
    from openai import AsyncOpenAI

    from bot import OpenAIModel

    async with (
        AsyncOpenAI(max_retries=0, timeout=5) as client,  # given, so ours to close
        Agent(name="a", model=OpenAIModel("m", client=client)) as agent,
    ):
        result = await agent(prompt="hi").collect()
        assert result.status.code == "error"
        assert "APIConnectionError" in (result.error or "")


def test_one_agent_serves_several_event_loops(
    openai_env: None, monkeypatch: pytest.MonkeyPatch, store_url: str
) -> None:
    """A module-level agent used by successive `asyncio.run()` calls gets a client per loop
    (the store, like the Slack app does, is opened by each loop and handed to the agent)."""
    import asyncio

    from state import open_store

    agent = Agent(name="loops", model="openai/m")

    async def once() -> str:
        async with (
            OpenAICompatServer(lambda messages: "pong") as server,
            open_store(store_url) as store,
        ):
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            agent.store = store
            result = await agent(prompt="ping").collect()
            return str(result.output)

    assert asyncio.run(once()) == "pong"
    assert asyncio.run(once()) == "pong"
