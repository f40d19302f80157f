"""The built-in chat-ops tools behind a scripted model, end to end in Slack."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_CONFIRM
from bot import Agent, chatops
from bot.testing import FunctionModel

from .conftest import ALICE, BOB, CAROL, BotFactory


@pytest.fixture(autouse=True)
def _fresh_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chatops, "fleet", chatops.Fleet.fresh())


def _ops(call: dict[str, Any]) -> Agent:
    def respond(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        last = messages[-1]
        if last["role"] == "tool":
            return str(last["content"])
        return [call]

    return Agent(name="ops", model=FunctionModel(respond), tools=list(chatops.agent.tools.values()))


async def test_deploy_changes_the_fleet_only_after_approval(make_bot: BotFactory) -> None:
    agent = _ops(
        {
            "name": "deploy",
            "arguments": {"service": "web", "version": "2.1.0", "environment": "staging"},
        }
    )
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "ship web 2.1.0 to staging")
        assert chatops.fleet.versions[("web", "staging")] == "2.0.1"
        await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)
        assert chatops.fleet.versions[("web", "staging")] == "2.1.0"
        assert h.texts(asked.ts) == ["Deployed web 2.1.0 to staging (was 2.0.1)."]


async def test_a_prod_deploy_needs_two_approvers(make_bot: BotFactory) -> None:
    """prod is under the two-person rule: bob's approval is counted and the card stays open;
    carol's is the second, and only then does the deploy run."""
    agent = _ops(
        {
            "name": "deploy",
            "arguments": {"service": "web", "version": "2.1.0", "environment": "prod"},
        }
    )
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "ship web 2.1.0 to prod")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert chatops.fleet.versions[("web", "prod")] == "2.0.1"
        assert f"1 of 2 approved:* <@{BOB}>" in str(h.card(asked.ts).blocks)
        await h.click(CAROL, card.ts, ACTION_APPROVE)
        assert chatops.fleet.versions[("web", "prod")] == "2.1.0"
        assert h.texts(asked.ts) == ["Deployed web 2.1.0 to prod (was 2.0.1)."]
        assert f"by <@{BOB}> and <@{CAROL}>" in str(h.card(asked.ts).blocks)


async def test_restart_asks_to_confirm(make_bot: BotFactory) -> None:
    agent = _ops({"name": "restart", "arguments": {"service": "api", "environment": "staging"}})
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart api on staging")
        card = h.card(asked.ts)
        assert "Restart api in staging?" in card.text
        assert chatops.fleet.restarts == {}
        await h.click(ALICE, card.ts, ACTION_CONFIRM)
        assert chatops.fleet.restarts == {("api", "staging"): 1}
        assert h.texts(asked.ts) == ["Restarted api in staging."]


def test_fleet_status() -> None:
    assert chatops.fleet_status("dev") == "dev: api 1.4.2, web 2.0.1, worker 0.9.7"
    assert len(chatops.fleet_status().splitlines()) == 3
