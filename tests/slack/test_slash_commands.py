"""Slash commands over real HTTP against LocalSlack: `/deploy api 2.3 prod` runs the tool through
the approval gate in a thread of its own; bad and unknown commands are answered plainly."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pytest

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.playground._slack import LocalSlack
from bot.slack import SlackBot, load_settings
from bot.testing import FunctionModel
from state import open_store

from .conftest import ALICE, BOB, CHANNEL, DAVE, BotFactory

DEPLOYS: list[dict[str, str]] = []


def deploy(service: Literal["api", "web"], version: str, environment: str = "staging") -> str:
    """Deploy a version of a service."""
    DEPLOYS.append({"service": service, "version": version, "environment": environment})
    return f"Deployed {service} {version} to {environment}."


def _never(messages: list[dict[str, Any]]) -> Any:
    raise AssertionError("a command must not call the model")


def _agent() -> Agent:
    tool = Tool(deploy, requires_approval=True, command="/deploy")
    return Agent(name="ops", model=FunctionModel(_never), tools=[tool])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    DEPLOYS.clear()


async def test_a_command_runs_the_tool_through_the_gate(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api 2.3 environment=prod")
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert opening.text == f"<@{ALICE}> ran /deploy api 2.3 environment=prod"
        card = h.card(opening.ts)
        assert card.thread_ts == opening.ts and DEPLOYS == []
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.requester == ALICE
        assert record.payload["arguments"] == {
            "service": "api",
            "version": "2.3",
            "environment": "prod",
        }

        await h.click(DAVE, card.ts, ACTION_APPROVE)  # not an approver: refused like any card
        assert DEPLOYS == [] and any("approve" in t.lower() for t in h.ephemerals(DAVE))
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert DEPLOYS == [{"service": "api", "version": "2.3", "environment": "prod"}]
        assert h.texts(opening.ts)[-1] == "Deployed api 2.3 to prod."


async def test_a_bad_command_gets_the_usage(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        missing = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api")
        invalid = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "moon 2.3")
        quote = await h.slack.run_command(ALICE, CHANNEL, "/deploy", 'api "2.3')
        await h.bot.drain()
        assert [r.status for r in (missing, invalid, quote)] == [200, 200, 200]
        said = h.ephemerals(ALICE)
        assert len(said) == 3
        assert said[0].startswith("Missing `version`.")
        assert said[1].startswith("`service`: Choose one of the options")
        assert said[2].startswith("A quote is not closed.")
        usage = "Usage: `/deploy &lt;service: api|web&gt; &lt;version&gt; [environment=staging]`"
        assert all(usage in text and "Traceback" not in text for text in said)
        assert h.slack.bot_messages() == [] and DEPLOYS == []
        audit = await h.store.recent_audit()
        assert sum(1 for e in audit if e.action == "refused" and e.user == ALICE) == 3


async def test_an_unknown_command_is_refused_plainly(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/rollback", "api")
        await h.bot.drain()
        assert response.status == 200
        assert h.ephemerals(ALICE) == ["`/rollback` is not one of my commands (mine: `/deploy`)."]
        assert h.slack.bot_messages() == []


async def test_a_redelivered_command_runs_once(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        first = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        again = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        await h.bot.drain()
        assert first.status == again.status == 200
        openings = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert len(openings) == 1
        card = h.card(openings[0].ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        late = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        await h.bot.drain()
        assert late.status == 200
        assert DEPLOYS == [{"service": "web", "version": "1.0", "environment": "staging"}]
        assert len([m for m in h.slack.bot_messages() if m.thread_ts is None]) == 1


async def test_a_command_is_a_signed_form_post(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        forged = await h.slack.send_raw(
            "command=%2Fdeploy&text=api+1&user_id=U0ALICE&channel_id=C0GENERAL&trigger_id=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            sign=False,
        )
        malformed = await h.slack.send_raw(
            "command=%2Fdeploy&text=api+1",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        await h.bot.drain()
        assert (forged.status, malformed.status) == (401, 400)
        assert h.slack.bot_messages() == [] and DEPLOYS == []


async def test_a_command_over_socket_mode(slack: LocalSlack, store_url: str) -> None:
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_app_token=slack.app_token,
        slack_api_url=slack.api_url,
        handback_store=store_url,
    )
    slack.delivery = "socket"
    stop = asyncio.Event()
    async with (
        open_store(store_url) as store,
        SlackBot(agent=_agent(), store=store, settings=settings, loops=False) as bot,
    ):
        connection = asyncio.create_task(bot.run_socket_mode(slack.app_token, stop))
        try:
            await slack.wait_for(lambda: slack.socket_connected)
            bad = await slack.run_command(ALICE, CHANNEL, "/deploy", "api")
            good = await slack.run_command(ALICE, CHANNEL, "/deploy", "web 3.1 prod")
            await bot.drain()
            assert (bad.status, good.status) == (200, 200)
            assert [e.text.split("\n")[0] for e in slack.ephemerals_for(ALICE)] == [
                "Missing `version`."
            ]
            [opening] = [m for m in slack.bot_messages() if m.thread_ts is None]
            [card] = slack.bot_messages(thread_ts=opening.ts)
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            await bot.drain()
            assert DEPLOYS == [{"service": "web", "version": "3.1", "environment": "prod"}]
        finally:
            stop.set()
            await connection
