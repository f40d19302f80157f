"""Socket Mode: the same bot connected over LocalSlack's WebSocket instead of HTTP."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from blocks import ACTION_APPROVE
from bot.slack import SlackBot, load_settings
from state import open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL


async def _acks(bot: SlackBot) -> dict[str, float]:
    """Socket Mode envelopes whose ack was timed so far in this process, by type, as the bot's
    `GET /metrics` serves them."""
    async with TestClient(TestServer(bot.web_app(health_only=True))) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        text = await response.text()
    return {
        sample.labels["type"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "handback_socket_mode_ack_seconds_count"
    }


async def test_mention_card_click_and_modal_errors_over_socket_mode(
    slack: TestSlack, store_url: str
) -> None:
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_app_token=slack.app_token,
        slack_api_url=slack.api_url,
        handback_store=store_url,
        handback_approvers="anyone",
    )
    assert settings.socket_mode and settings.slack_signing_secret is None
    slack.delivery = "socket"
    stop = asyncio.Event()
    async with (
        open_store(store_url) as store,
        SlackBot(agent=agents.approval_agent, store=store, settings=settings, loops=False) as bot,
    ):
        acked = await _acks(bot)  # before the socket connects: nothing of this test yet
        connection = asyncio.create_task(bot.run_socket_mode(slack.app_token, stop))
        try:
            await slack.wait_for(lambda: slack.socket_connected)
            asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
            await bot.drain()
            [card] = slack.bot_messages(thread_ts=asked.ts)

            # A deny modal submitted empty gets its inline errors back through the socket ack.
            assert (await slack.click(BOB, card.ts, "hb:deny_reason")).status == 200
            await bot.drain()
            [view] = slack.views.values()
            [reason] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
            errors = await slack.submit_view(BOB, view.id, {reason: ""})
            assert errors.json()["response_action"] == "errors"

            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            await bot.drain()
            assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
            answers = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
            assert answers == ["Tool said: deployed api to prod"]
            # Every envelope's ack is timed: the mention, two clicks and the modal submission.
            now = await _acks(bot)
            assert now.get("events_api", 0.0) >= acked.get("events_api", 0.0) + 1
            assert now.get("interactive", 0.0) >= acked.get("interactive", 0.0) + 3
        finally:
            stop.set()
            await connection
    assert not slack.socket_connected
