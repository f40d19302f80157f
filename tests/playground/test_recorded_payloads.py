"""The payloads LocalSlack sends the bot have every field Slack's recorded payloads have: each
builder's output keeps every key of its fixture in `bot/playground/recorded/` (recursively,
leaving out what depends on the content, such as blocks), and Bolt reads from it the team, user,
channel and thread Slack would have it read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_bolt.request.internals import (
    extract_channel_id,
    extract_team_id,
    extract_thread_ts,
    extract_user_id,
)
from slack_sdk.web.async_client import AsyncWebClient

import blocks

# The payload builders and Slack's recorded payloads they are compared with.
from bot.playground._payloads import (
    RECORDED,
    Recorded,
    _load,
    agent_session_stopped,
    app_home_opened,
    home_block_actions,
    recorded,
    slash_command,
    ssl_check,
    url_verification,
    view_closed,
)
from tests.blocks._factory import approval, ask
from tests.blocks._slack import click, submit

from .._local_slack import TestSlack

CHANNEL = "C0GENERAL"
ALICE = "U0ALICE"

CONTENT: frozenset[str] = frozenset({"blocks", "values", "elements"})
"""Keys whose contents are what was posted or picked, not a shape Slack fixes."""


def missing_keys(recorded_: Any, built: Any, path: str = "") -> list[str]:
    """The paths of keys `recorded_` has and `built` lacks, through nested objects and lists."""
    if isinstance(recorded_, dict):
        if not isinstance(built, dict):
            return [path or "."]
        found: list[str] = []
        for key, value in recorded_.items():
            where = f"{path}.{key}" if path else key
            if key not in built:
                found.append(where)
            elif key not in CONTENT and value is not None:
                found += missing_keys(value, built[key], where)
        return found
    if isinstance(recorded_, list) and recorded_ and isinstance(recorded_[0], dict):
        if not isinstance(built, list) or not built:
            return [f"{path}[]"]
        return [gap for item in built for gap in missing_keys(recorded_[0], item, f"{path}[]")]
    return []


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with TestSlack(agent_view=True) as local:
        yield local


def _client(slack: TestSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


BUTTON = {
    "type": "actions",
    "block_id": "hb|b1",
    "elements": [
        {
            "type": "button",
            "action_id": "approve",
            "text": {"type": "plain_text", "text": "Approve"},
            "value": "yes",
        }
    ],
}
MODAL = {
    "type": "modal",
    "callback_id": "hb:modal",
    "notify_on_close": True,
    "title": {"type": "plain_text", "text": "Answer"},
    "submit": {"type": "plain_text", "text": "Send"},
    "blocks": [
        {
            "type": "input",
            "block_id": "answer",
            "label": {"type": "plain_text", "text": "Answer"},
            "element": {"type": "plain_text_input", "action_id": "value"},
        }
    ],
}


async def _built(slack: TestSlack) -> dict[Recorded, dict[str, Any]]:
    """One payload of each recorded kind, as LocalSlack builds it."""
    client = _client(slack)
    mention = await slack.post_user_message(ALICE, CHANNEL, "deploy api", deliver=False)
    reply = await slack.post_user_message(
        ALICE, CHANNEL, "and staging", thread_ts=mention.ts, mention=False, deliver=False
    )
    app_mention, message = slack.events_for(mention)
    (in_thread,) = slack.events_for(reply)
    card = await client.chat_postMessage(
        channel=CHANNEL, thread_ts=mention.ts, text="deploy?", blocks=[BUTTON]
    )
    await client.views_publish(user_id=ALICE, view={"type": "home", "blocks": [BUTTON]})
    trigger = slack.new_trigger_id()
    slack.triggers[trigger] = ALICE
    opened = await client.views_open(trigger_id=trigger, view=MODAL)
    view_id = opened["view"]["id"]
    return {
        "app_mention": app_mention,
        "message": message,
        "message_in_thread": in_thread,
        "event_callback": slack.event_envelope(app_mention),
        "block_actions_message": slack.block_actions_payload(ALICE, card["ts"], "approve"),
        "block_actions_home": home_block_actions(
            slack, ALICE, "approve", value=None, selected=None
        ),
        "view_submission": slack.view_submission_payload(ALICE, view_id, {"answer": "42"}),
        "view_closed": view_closed(slack, ALICE, slack.views[view_id]),
        "slash_command": slash_command(
            slack,
            ALICE,
            CHANNEL,
            "/deploy",
            "api 2.3 prod",
            trigger_id=slack.new_trigger_id(),
            response_url=slack.response_url(CHANNEL, ALICE),
        ),
        "agent_session_stopped": agent_session_stopped(
            ALICE, CHANNEL, mention.ts, stopped=[card["ts"]], event_ts=slack.new_ts()
        ),
        "app_home_opened": app_home_opened(slack, ALICE, event_ts=slack.new_ts()),
        "url_verification": url_verification("c-123"),
        "ssl_check": ssl_check(),
    }


async def test_every_payload_has_every_key_slack_records(slack: TestSlack) -> None:
    built = await _built(slack)
    assert sorted(built) == sorted(RECORDED)
    gaps = {name: missing_keys(recorded(name), built[name]) for name in RECORDED}
    assert {name: found for name, found in gaps.items() if found} == {}


def test_the_key_check_finds_a_dropped_field() -> None:
    fixture = recorded("block_actions_message")
    built = recorded("block_actions_message")
    del built["container"]["is_ephemeral"]
    del built["actions"][0]["action_ts"]
    del built["enterprise"]
    assert missing_keys(fixture, built) == [
        "container.is_ephemeral",
        "enterprise",
        "actions[].action_ts",
    ]


def test_each_fixture_names_its_source() -> None:
    for name in RECORDED:
        source, _ = _load(name)
        assert "slackapi/" in source or "docs.slack.dev/" in source, name


async def test_bolt_reads_who_where_and_which_thread_from_them(slack: TestSlack) -> None:
    built = await _built(slack)
    thread = built["message_in_thread"]["thread_ts"]
    expected: dict[Recorded, tuple[str | None, str | None, str | None]] = {
        "event_callback": (ALICE, CHANNEL, None),
        "block_actions_message": (ALICE, CHANNEL, thread),
        "block_actions_home": (ALICE, None, None),
        "view_submission": (ALICE, None, None),
        "view_closed": (ALICE, None, None),
        "slash_command": (ALICE, CHANNEL, None),
    }
    for name, (user, channel, thread_ts) in expected.items():
        body = built[name]
        assert extract_team_id(body) == slack.team_id, name
        assert extract_user_id(body) == user, name
        assert extract_channel_id(body) == channel, name
        assert extract_thread_ts(body) == thread_ts, name
    stop = slack.event_envelope(built["agent_session_stopped"])
    assert extract_thread_ts(stop) == built["agent_session_stopped"]["thread_ts"]
    assert extract_user_id(stop) == ALICE and extract_channel_id(stop) == CHANNEL


def test_the_blocks_tests_payloads_have_every_key_slack_records() -> None:
    """`tests/blocks/_slack.py` builds the payloads the renderer's own tests parse: they keep
    Slack's recorded shape too."""
    card = blocks.render_card(approval({"service": "api"}))
    clicked = click(dict(card), blocks.ACTION_APPROVE)
    assert missing_keys(recorded("block_actions_message"), clicked) == []
    submitted = submit(blocks.render_modal(ask("Which one?")), {})
    assert missing_keys(recorded("view_submission"), submitted) == []
