"""A slash command in a channel the bot is not in: Slack answers `not_in_channel` to the bot's
posts there, so nothing runs and the person is told through the command's `response_url` (the
one way to reach them without membership) how to invite the bot; after `/invite` it works."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import Agent, Tool
from bot.testing import FunctionModel

from .._local_slack import TestSlack
from .conftest import ALICE, CHANNEL, BotFactory

DEPLOYS: list[str] = []


def deploy(service: Literal["api", "web"], version: str, environment: str = "staging") -> str:
    """Deploy a version of a service."""
    DEPLOYS.append(f"{service} {version} {environment}")
    return f"Deployed {service} {version} to {environment}."


def _never(messages: list[dict[str, Any]]) -> Any:
    raise AssertionError("a command must not call the model")


def _agent() -> Agent:
    tool = Tool(deploy, command="/deploy")
    return Agent(name="ops", model=FunctionModel(_never), tools=[tool])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    DEPLOYS.clear()


async def test_localslack_refuses_posts_where_the_bot_is_not_a_member(slack: TestSlack) -> None:
    slack.leave(CHANNEL, slack.bot_user_id)
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    for call in (
        client.chat_postMessage(channel=CHANNEL, text="hi"),
        client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="psst"),
    ):
        with pytest.raises(SlackApiError) as caught:
            await call
        assert caught.value.response["error"] == "not_in_channel"
    slack.add_channel("G0SECRET", "secret", private=True, members=[ALICE])
    slack.leave("G0SECRET", slack.bot_user_id)
    with pytest.raises(SlackApiError) as hidden:
        await client.chat_postMessage(channel="G0SECRET", text="hi")
    assert hidden.value.response["error"] == "channel_not_found"


async def test_a_command_where_the_bot_is_not_a_member_runs_nothing_and_says_how_to_invite(
    make_bot: BotFactory,
) -> None:
    async with make_bot(_agent()) as h:
        h.slack.leave(CHANNEL, h.slack.bot_user_id)
        response = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api 2.3 prod")
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        assert DEPLOYS == [] and h.slack.bot_messages() == []
        [told] = h.ephemerals(ALICE)
        assert "not in this channel, so nothing ran" in told and "/invite" in told
        assert "`/deploy` again" in told

        h.slack.join(CHANNEL, h.slack.bot_user_id)  # someone runs /invite @handback
        assert (await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api 2.3 prod")).status == 200
        await h.bot.drain()
        assert DEPLOYS == ["api 2.3 prod"]
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert opening.text == f"<@{ALICE}> ran /deploy service=api version=2.3 environment=prod"
        assert h.texts(opening.ts)[-1] == "Deployed api 2.3 to prod."
