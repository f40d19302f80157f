"""`handback doctor`'s model line: one call with a tool against a local OpenAI-compatible
server (`bot.testing.OpenAICompatServer`), never the internet."""

from __future__ import annotations

import pytest

from bot.testing import OpenAICompatServer
from tests.cli.test_doctor import doctor, line

from .._local_slack import TestSlack

pytestmark = pytest.mark.slow

CHATOPS = "bot.chatops:agent"  # its model is HANDBACK_MODEL


def ok_reply(messages: list[dict[str, object]]) -> str:
    return "ok"


async def test_a_model_the_server_serves_is_ok(sqlite_store_url: str) -> None:
    async with OpenAICompatServer(ok_reply, models=["qwen2.5:7b"]) as server, TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=CHATOPS,
            HANDBACK_MODEL="openai/qwen2.5:7b",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="ollama",
        )
    model = line(lines, "model")
    assert model.startswith("ok    model: agent `chatops` uses `openai/qwen2.5:7b`"), model
    assert server.base_url in model and "answered a call with tools" in model
    # One call, and it offered a tool: what the bot's own calls will need.
    assert len(server.requests) == 1 and server.requests[0]["tools"]
    assert code == 0, lines


async def test_a_mistyped_model_fails_in_one_line_with_the_servers_words(
    sqlite_store_url: str,
) -> None:
    async with (
        OpenAICompatServer(ok_reply, models=["gpt-4o-mini"]) as server,
        TestSlack() as slack,
    ):
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=CHATOPS,
            HANDBACK_MODEL="openai/gpt-4o-mnii",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="sk-test",
        )
    assert code == 1
    model = line(lines, "model")
    assert model.startswith("FAIL  model: agent `chatops` uses `openai/gpt-4o-mnii`"), model
    assert "the server has no model `gpt-4o-mnii`" in model
    assert "The model `gpt-4o-mnii` does not exist" in model
    assert len(server.requests) == 1  # no retries: the answer will not change


async def test_a_server_that_refuses_tools_fails_in_one_line(sqlite_store_url: str) -> None:
    async with OpenAICompatServer(ok_reply, tools=False) as server, TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=CHATOPS,
            HANDBACK_MODEL="openai/Qwen/Qwen2.5-7B-Instruct",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY="EMPTY",
        )
    assert code == 1
    model = line(lines, "model")
    assert model.startswith("FAIL  model:"), model
    assert "answers but refuses tool calls (HTTP 400" in model
    assert "--enable-auto-tool-choice" in model
    # The second call, without the tool, is what tells "no tools" from "no model".
    assert [bool(r.get("tools")) for r in server.requests] == [True, False]


async def test_a_model_server_out_of_reach_fails_in_one_line(sqlite_store_url: str) -> None:
    async with OpenAICompatServer(ok_reply) as server:
        url = server.base_url
    async with TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=CHATOPS,
            HANDBACK_MODEL="openai/gpt-4o-mini",
            OPENAI_BASE_URL=url,
            OPENAI_API_KEY="sk-test",
        )
    assert code == 1
    assert "out of reach" in line(lines, "model")


async def test_an_azure_deployment_by_name_and_api_version(sqlite_store_url: str) -> None:
    async with OpenAICompatServer(ok_reply) as server, TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent="tests.cli.model_agents:azure_agent",
            AZURE_DEPLOYMENT="gpt-4o-prod",
            AZURE_OPENAI_ENDPOINT=server.azure_endpoint,
            AZURE_OPENAI_API_KEY="azure-key",
            OPENAI_API_VERSION="2024-10-21",
            OPENAI_API_KEY="",
        )
    model = line(lines, "model")
    assert model.startswith("ok    model: agent `azure` uses `openai/gpt-4o-prod`"), model
    assert "/openai/" in model and "answered a call with tools" in model
    assert server.requests[0]["model"] == "gpt-4o-prod"
    assert code == 0, lines
