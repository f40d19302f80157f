"""A rule per channel, from the config file, at the gate in Slack (LocalSlack, the playground's
bot): in DEPLOYS `ops_deploy` needs two approvers from S0LEADS, in GENERAL one named person;
a channel the file does not name gets the server's own rule, never no rule. The call reaches
the MCP server once, counted on its side."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot import agent_from_file
from bot.events import InteractionEvent
from bot.playground import Playground
from bot.testing import OpenAICompatServer
from state import RULE_KEY, open_store

from .config_files import DEPLOYS, GENERAL, LEADS, calls, channel_rules

pytestmark = pytest.mark.slow


async def test_each_channel_gates_the_tool_with_its_own_rule_in_slack(
    model: OpenAICompatServer, tmp_path: Path, sqlite_store_url: str
) -> None:
    agent = agent_from_file(channel_rules(tmp_path))
    async with Playground(
        agent, environ={"OPENAI_API_KEY": "test-key"}, store_url=sqlite_store_url
    ) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        slack.add_usergroup(LEADS, ["U0CAROL", "U0DAVE"])
        # DEPLOYS: two distinct approvers from the leads; bob (not one of them) is refused.
        asked = await slack.post_user_message("U0ALICE", DEPLOYS, "call ops_deploy")
        await bot.drain()
        [card] = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        assert "Needs 2 different approvers" in str(card.blocks)
        await slack.click("U0BOB", card.ts, ACTION_APPROVE)
        await bot.drain()
        assert calls(tmp_path / "a.log", "deploy") == []
        await slack.click("U0CAROL", card.ts, ACTION_APPROVE)
        await bot.drain()
        assert calls(tmp_path / "a.log", "deploy") == []  # one of two
        await slack.click("U0DAVE", card.ts, ACTION_APPROVE)
        await bot.drain()
        assert len(calls(tmp_path / "a.log", "deploy")) == 1
        # GENERAL: bob alone approves it; dave (the server's own approver) may not here.
        asked = await slack.post_user_message("U0ALICE", GENERAL, "call ops_deploy")
        await bot.drain()
        [card] = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        assert "Needs 2 different approvers" not in str(card.blocks)
        await slack.click("U0DAVE", card.ts, ACTION_APPROVE)
        await bot.drain()
        assert len(calls(tmp_path / "a.log", "deploy")) == 1
        await slack.click("U0BOB", card.ts, ACTION_APPROVE)
        await bot.drain()
        assert len(calls(tmp_path / "a.log", "deploy")) == 2
        refusals = [e.text for e in slack.ephemerals_for("U0BOB")]
        refusals += [e.text for e in slack.ephemerals_for("U0DAVE")]
        assert len(refusals) >= 2, refusals  # bob in DEPLOYS, dave in GENERAL


async def test_a_channel_not_named_gets_the_tools_own_rule_never_none(
    model: OpenAICompatServer, tmp_path: Path
) -> None:
    agent = agent_from_file(channel_rules(tmp_path))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, agent:
        agent.store = store
        rules = {}
        for channel in (DEPLOYS, GENERAL, "C0ELSEWHERE", None):
            events = [e async for e in agent(prompt="call ops_deploy", channel=channel)]
            [approval] = [e for e in events if isinstance(e, InteractionEvent)]
            rule = approval.payload[RULE_KEY]  # the rule the card and the claim go by
            rules[channel] = (tuple(rule["approvers"]), rule["count"])
        # The agent's tool itself is unchanged by the channels' rules.
        assert (
            agent.tools["ops_deploy"].requires_approval
            == agent.tools_in(None)["ops_deploy"].requires_approval
        )
    assert rules == {
        DEPLOYS: ((LEADS,), 2),
        GENERAL: (("U0BOB",), 1),
        "C0ELSEWHERE": (("U0DAVE",), 1),
        None: (("U0DAVE",), 1),
    }
    assert calls(tmp_path / "a.log", "deploy") == []


async def test_a_tool_only_a_channels_rule_gates_says_so_on_its_card(
    model: OpenAICompatServer, tmp_path: Path
) -> None:
    agent = agent_from_file(channel_rules(tmp_path))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, agent:
        agent.store = store
        events = [e async for e in agent(prompt="call ops_status", channel=GENERAL)]
        [approval] = [e for e in events if isinstance(e, InteractionEvent)]
        assert approval.payload["gated_because"] == "this channel's rule"
        assert approval.payload[RULE_KEY]["approvers"] == ["U0BOB"]
        # In DEPLOYS its read-only annotation stands: it runs at once.
        ran = await agent(prompt="call ops_status", channel=DEPLOYS).collect()
        assert ran.status.code == "success" and "healthy" in str(ran.output)
    assert len(calls(tmp_path / "a.log", "status")) == 1


async def test_a_continuation_without_the_event_is_gated_by_its_stored_channels_rule(
    model: OpenAICompatServer, tmp_path: Path
) -> None:
    agent = agent_from_file(channel_rules(tmp_path))
    async with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store, agent:
        agent.store = store
        first = await agent(prompt="call ops_status", channel=DEPLOYS).collect()
        assert first.status.code == "success"
        # Another process continues the conversation knowing only its run id.
        events = [e async for e in agent(prompt="call ops_deploy", parent_id=first.run_id)]
        [approval] = [e for e in events if isinstance(e, InteractionEvent)]
        rule = approval.payload[RULE_KEY]
        assert (rule["approvers"], rule["count"]) == ([LEADS], 2)  # DEPLOYS', not the default
