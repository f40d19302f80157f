"""An agent from a config file with two MCP servers and two channels: in each channel the model
is offered only that channel's tools (asserted on the requests the model server receives), and
neither the model nor an approval can run a tool outside the channel's set."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot import UsageError, agent_from_file
from bot.events import InteractionEvent
from bot.playground import Playground
from bot.testing import OpenAICompatServer
from state import open_store

from .config_files import (
    DEPLOYS,
    GENERAL,
    OPS_TOOLS,
    TIX_TOOLS,
    calls,
    offered,
    two_servers,
)

pytestmark = pytest.mark.slow


async def test_in_each_channel_the_model_is_offered_only_that_channels_tools(
    model: OpenAICompatServer, tmp_path: Path, sqlite_store_url: str
) -> None:
    agent = agent_from_file(two_servers(tmp_path))
    async with Playground(
        agent, environ={"OPENAI_API_KEY": "test-key"}, store_url=sqlite_store_url
    ) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        await slack.post_user_message("U0ALICE", DEPLOYS, "what can you do here?")
        await bot.drain()
        assert offered(model.requests[-1]) == OPS_TOOLS
        await slack.post_user_message("U0ALICE", GENERAL, "and here?")
        await bot.drain()
        assert offered(model.requests[-1]) == TIX_TOOLS | {"ops_status"}
        # The instructions are the system prompt of every request.
        assert model.requests[-1]["messages"][0] == {
            "role": "system",
            "content": "You run operations.",
        }


async def test_a_tool_outside_the_channels_set_is_not_run_even_when_the_model_names_it(
    model: OpenAICompatServer, tmp_path: Path, sqlite_store_url: str
) -> None:
    agent = agent_from_file(two_servers(tmp_path))
    async with Playground(
        agent, environ={"OPENAI_API_KEY": "test-key"}, store_url=sqlite_store_url
    ) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        asked = await slack.post_user_message("U0ALICE", GENERAL, "call ops_deploy")
        await bot.drain()
        said = [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
        assert any("there is no tool `ops_deploy`" in text for text in said), said
        assert not [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]  # no card
        # In its own channel the same call is gated and runs once approved.
        asked = await slack.post_user_message("U0ALICE", DEPLOYS, "call ops_deploy")
        await bot.drain()
        [card] = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        await slack.click("U0BOB", card.ts, ACTION_APPROVE)
        await bot.drain()
    assert len(calls(tmp_path / "a.log", "deploy")) == 1


async def test_an_approval_given_for_a_call_cannot_run_it_in_a_channel_without_the_tool(
    model: OpenAICompatServer, tmp_path: Path
) -> None:
    agent = agent_from_file(two_servers(tmp_path))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, agent:
        agent.store = store
        paused = [e async for e in agent(prompt="call ops_deploy", channel=DEPLOYS)]
        [approval] = [e for e in paused if isinstance(e, InteractionEvent)]
        # The conversation is in DEPLOYS (stored with the run): its answer cannot be taken to
        # GENERAL, where the tool is not offered, nor to GENERAL's tool set.
        elsewhere = agent(
            parent_id=paused[-1].run_id, resume={approval.interaction_id: True}, channel=GENERAL
        )
        with pytest.raises(UsageError, match="cannot be resumed or continued in"):
            await elsewhere.collect()
        assert calls(tmp_path / "a.log", "deploy") == []


async def test_a_channel_not_named_is_offered_no_tools_unless_the_file_says_so(
    model: OpenAICompatServer, tmp_path: Path
) -> None:
    agent = agent_from_file(two_servers(tmp_path))
    async with agent:
        assert agent.tools_in("C0ELSEWHERE") == {}
        assert agent.tools_in(None) == {}  # a run outside Slack: the "*" set, none here
        assert set(agent.tools_in(DEPLOYS)) == OPS_TOOLS
    path = two_servers(tmp_path)
    path.write_text(path.read_text() + '\n[channels."*"]\ntools = ["ops_st*"]\n')
    other = agent_from_file(path)
    async with other:
        assert set(other.tools_in("C0ELSEWHERE")) == {"ops_status"}
