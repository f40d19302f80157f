"""A click on a channel message and a click on an ephemeral one are built by one `block_actions`
builder; both payloads stay byte for byte what the two builders sent before they were merged
(`click_payloads.json`, taken from the code before the merge)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.playground import LocalSlack

from .._local_slack import Ephemeral, Message

pytestmark = pytest.mark.quick

EXPECTED = Path(__file__).with_name("click_payloads.json")

BLOCKS: list[dict[str, Any]] = [
    {
        "type": "section",
        "block_id": "pick",
        "text": {"type": "mrkdwn", "text": "Where?"},
        "accessory": {
            "type": "static_select",
            "action_id": "where",
            "options": [
                {"text": {"type": "plain_text", "text": "Prod"}, "value": "prod"},
                {"text": {"type": "plain_text", "text": "Staging"}, "value": "staging"},
            ],
        },
    },
    {
        "type": "actions",
        "block_id": "hb|I1|go",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "value": "yes",
                "text": {"type": "plain_text", "text": "Approve"},
            }
        ],
    },
]


def _steady(payload: dict[str, Any]) -> dict[str, Any]:
    """The payload without what differs on every click (random ids, the clock)."""
    payload["trigger_id"] = "<trigger>"
    payload["response_url"] = "<response_url>"
    for action in payload["actions"]:
        action["action_ts"] = "<action_ts>"
    return payload


def _click_payloads() -> dict[str, dict[str, Any]]:
    slack = LocalSlack()
    slack.clock = lambda: 1700000000.0
    parent = Message(channel="C0DEPLOYS", ts=slack.new_ts(), text="deploy?", user="U0ALICE")
    card = Message(
        channel="C0DEPLOYS",
        ts=slack.new_ts(),
        text="card",
        bot_id=slack.bot_id,
        user=slack.bot_user_id,
        thread_ts=parent.ts,
        blocks=BLOCKS,
    )
    slack.messages.append(parent)
    slack.messages.append(card)
    shown = Ephemeral(
        channel="C0DEPLOYS",
        user="U0BOB",
        text="only you",
        thread_ts=parent.ts,
        blocks=BLOCKS,
        message_ts=slack.new_ts(),
    )
    slack.ephemerals.append(shown)
    payload = slack.block_actions_payload
    return {
        "message_select": _steady(payload("U0BOB", card.ts, "where", selected="Staging")),
        "message_button": _steady(payload("U0BOB", card.ts, "approve")),
        "ephemeral_select": _steady(payload("U0BOB", shown.message_ts, "where", selected="prod")),
        "ephemeral_button": _steady(payload("U0BOB", shown.message_ts, "approve")),
    }


def test_message_and_ephemeral_clicks_keep_their_payloads_byte_for_byte() -> None:
    expected = json.loads(EXPECTED.read_text())
    # Compared as JSON text so that the order of keys counts too, as it does on the wire.
    actual = _click_payloads()
    for name, shape in expected.items():
        assert json.dumps(actual[name]) == json.dumps(shape), name
    assert list(actual) == list(expected)
