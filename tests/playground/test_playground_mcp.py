"""The playground runs an agent with an MCP server: the session is opened with the playground,
an MCP approval card and an MCP server's question (elicitation) work there, and the server is
closed with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_OPTION
from bot import Agent
from bot.playground import Playground
from bot.testing import FunctionModel

from ..mcp.conftest import ops_in, until

pytestmark = pytest.mark.slow


def _respond(messages: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "tool":
        return f"Tool said: {messages[-1]['content']}"
    return [{"name": "ops_deploy", "arguments": {"service": "api", "version": "2.4"}}]


async def test_an_mcp_approval_card_works_in_the_playground(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    ops = ops_in(tmp_path)
    server = ops.stdio(trust_annotations=True)
    agent = Agent(name="ops", model=FunctionModel(_respond), tools=[server])
    async with Playground(agent, environ={}, store_url=sqlite_store_url) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        assert "ops_deploy" in agent.tools
        asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "deploy api 2.4")
        await bot.drain()
        # The playground's own worker loop may hold the item while drain looks: wait for it.
        await until(lambda: any(m.blocks for m in slack.bot_messages(thread_ts=asked.ts)))
        [card] = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        assert "*MCP server:* `ops`" in str(card.blocks)
        await slack.click("U0BOB", card.ts, ACTION_APPROVE)  # one of the playground's approvers
        await bot.drain()
        await until(
            lambda: (
                "Tool said: deployed api 2.4"
                in [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
            )
        )
        said = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
        assert said[-1] == "Tool said: deployed api 2.4"
        assert len(ops.calls("deploy")) == 1
    assert server.tools() == []


async def test_an_mcp_servers_question_is_a_card_in_the_playground(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    ops = ops_in(tmp_path)
    server = ops.stdio(approvals={"pick": False})

    def respond(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "ops_pick", "arguments": {}}]

    agent = Agent(name="ops", model=FunctionModel(respond), tools=[server])
    async with Playground(agent, environ={}, store_url=sqlite_store_url) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "pick a region")
        await bot.drain()
        # The playground's own worker loop may hold the item while drain looks: wait for it.
        await until(lambda: any(m.blocks for m in slack.bot_messages(thread_ts=asked.ts)))
        [card] = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        assert "Question from an MCP server" in str(card.blocks)
        await slack.click("U0ALICE", card.ts, f"{ACTION_OPTION}:0", value="0")
        await bot.drain()
        await until(
            lambda: (
                "Tool said: picked accept {'region': 'eu'}"
                in [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
            )
        )
        said = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
        assert said[-1] == "Tool said: picked accept {'region': 'eu'}"
