"""LocalSlack treats an ephemeral message as Slack does: `chat.update` cannot find it; a click on
it says `is_ephemeral` and carries no `message`; the click's `response_url` replaces it
(`replace_original`) or removes it (`delete_original`), and only within the URL's uses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import LocalSlack

CHANNEL = "C0GENERAL"
ALICE = "U0ALICE"

_BUTTON = {
    "type": "actions",
    "block_id": "b",
    "elements": [
        {
            "type": "button",
            "action_id": "go",
            "value": "v",
            "text": {"type": "plain_text", "text": "Go"},
        }
    ],
}


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    async with LocalSlack(agent_view=True) as local:
        yield local


async def _ephemeral(slack: LocalSlack) -> str:
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    posted = await client.chat_postEphemeral(
        channel=CHANNEL, user=ALICE, text="only you", blocks=[_BUTTON], thread_ts="1.000"
    )
    return str(posted["message_ts"])


async def _post(url: str, body: dict[str, Any]) -> int:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status


async def test_chat_update_cannot_find_an_ephemeral_message(slack: LocalSlack) -> None:
    ts = await _ephemeral(slack)
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    with pytest.raises(SlackApiError) as refused:
        await client.chat_update(channel=CHANNEL, ts=ts, text="changed")
    assert refused.value.response["error"] == "message_not_found"


async def test_a_click_on_an_ephemeral_says_so_and_its_url_replaces_it(slack: LocalSlack) -> None:
    ts = await _ephemeral(slack)
    payload = slack.block_actions_payload(ALICE, ts, "go")
    assert payload["container"]["is_ephemeral"] is True
    assert payload["container"]["message_ts"] == ts and "message" not in payload
    assert payload["container"]["thread_ts"] == "1.000"

    done = {"type": "section", "text": {"type": "mrkdwn", "text": "done"}}
    status = await _post(
        payload["response_url"], {"replace_original": True, "text": "done", "blocks": [done]}
    )
    assert status == 200
    [shown] = slack.ephemerals_for(ALICE)
    assert shown.message_ts == ts and shown.text == "done" and shown.blocks == [done]

    assert await _post(payload["response_url"], {"delete_original": True, "text": "x"}) == 200
    assert slack.ephemerals_for(ALICE) == []
    # Gone: nothing left to replace.
    assert await _post(payload["response_url"], {"replace_original": True, "text": "y"}) == 404


async def test_a_replacement_slack_would_refuse_is_refused(slack: LocalSlack) -> None:
    ts = await _ephemeral(slack)
    url = slack.block_actions_payload(ALICE, ts, "go")["response_url"]
    status = await _post(url, {"replace_original": True, "text": "x", "blocks": [{"type": "?"}]})
    assert status == 400
    [shown] = slack.ephemerals_for(ALICE)
    assert shown.text == "only you"
