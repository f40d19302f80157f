"""Hostile requests to `/slack/events`: verified before they are read, checked before Bolt.

Unverified requests get 401 whatever their body; verified ones that do not fit get 400 (an event
gets its ack), never 500, never a prompt; every refusal is one log line without a traceback.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
from slack_sdk.signature import SignatureVerifier

from blocks import ACTION_APPROVE, ACTION_CONFIRM
from bot.slack import SlackBot, load_settings
from state import open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL, BotFactory, Clock, Harness, calls_to

FORM = {"Content-Type": "application/x-www-form-urlencoded"}
OTHER_CHANNEL = "C0DEPLOYS"


def _form(payload: Any) -> str:
    return urlencode({"payload": payload if isinstance(payload, str) else json.dumps(payload)})


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


HOSTILE_BODIES = {
    "bad-json": "{not json",
    "deep-json": "[" * 100_000 + "]" * 100_000,
    "deep-object": _deep(50_000),
    "deeper-than-slack-nests": _deep(100),
    "array": "[]",
    "null": "null",
    "number": "123",
    "string": '"event_callback"',
    "empty": "",
    "form-bad-payload": _form("{oops"),
    "form-array-payload": _form("[1, 2]"),
}


def _logged(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def _assert_one_line(caplog: pytest.LogCaptureFixture) -> None:
    records = _logged(caplog)
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].exc_info is None
    assert "\n" not in records[0].getMessage()
    assert "Traceback" not in caplog.text


async def _nothing_happened(h: Harness, calls_before: int) -> None:
    await h.bot.drain()
    assert h.slack.bot_messages() == []
    assert len(h.slack.calls) == calls_before


def _sign(h: Harness, body: str, timestamp: str) -> dict[str, str]:
    signature = SignatureVerifier(h.slack.signing_secret).generate_signature(
        timestamp=timestamp, body=body
    )
    assert signature is not None
    return {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


async def _send(h: Harness, body: str, headers: dict[str, str] | None = None) -> int:
    return (await h.slack.send_raw(body, headers=headers)).status


# ------------------------------------------------------------------ unverified: 401


@pytest.mark.parametrize("name", HOSTILE_BODIES)
async def test_unsigned_hostile_bodies_get_401_and_one_line(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        caplog.clear()
        response = await h.slack.send_raw(HOSTILE_BODIES[name], sign=False)
        assert response.status == 401
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)


@pytest.mark.parametrize(
    "timestamp",
    ["abc", "123.5", "", " 1700000000", "-5", "1e9", "١٧٠٠٠٠٠٠٠٠", "9" * 40, "0"],
)
@pytest.mark.parametrize("name", ["bad-json", "deep-json", "array"])
async def test_timestamps_that_are_not_recent_whole_seconds_get_401(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, timestamp: str, name: str
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        body = HOSTILE_BODIES[name]
        caplog.clear()
        response = await h.slack.send_raw(body, headers=_sign(h, body, timestamp), sign=False)
        assert response.status == 401
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)


async def test_a_valid_event_signed_with_a_float_timestamp_gets_401(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        event = {
            "type": "app_mention",
            "user": ALICE,
            "text": "hi",
            "ts": "1.1",
            "channel": CHANNEL,
        }
        body = json.dumps(h.slack.event_envelope(event))
        timestamp = f"{time.time():.1f}"
        response = await h.slack.send_raw(body, headers=_sign(h, body, timestamp), sign=False)
        assert response.status == 401


# ------------------------------------------------------------- verified, malformed: 400


@pytest.mark.parametrize("name", HOSTILE_BODIES)
async def test_signed_hostile_bodies_get_400_and_one_line(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        caplog.clear()
        headers = FORM if name.startswith("form") else None
        assert await _send(h, HOSTILE_BODIES[name], headers) == 400
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)


def _click(**changes: Any) -> dict[str, Any]:
    payload = {
        "type": "block_actions",
        "user": {"id": BOB},
        "actions": [{"action_id": ACTION_APPROVE, "block_id": "hb|x|a", "value": "approve"}],
        "channel": {"id": CHANNEL},
        "container": {"channel_id": CHANNEL, "message_ts": "1.1"},
    }
    return {**payload, **changes}


def _submission(**changes: Any) -> dict[str, Any]:
    view = {"type": "modal", "callback_id": "hb:modal", "private_metadata": "x", "blocks": []}
    return {"type": "view_submission", "user": {"id": BOB}, "view": view, **changes}


MALFORMED_PAYLOADS: dict[str, Any] = {
    "no-type": {"type": None},
    "type-not-a-string": {"type": ["block_actions"]},
    "click-user-a-string": {"user": BOB},
    "click-no-user": {"user": None},
    "click-no-actions": {"actions": []},
    "click-actions-strings": {"actions": ["hb:approve"]},
    "click-action-id-a-number": {"actions": [{"action_id": 5, "block_id": "hb|x|a"}]},
    "click-channel-a-list": {"channel": [CHANNEL]},
    "click-container-a-string": {"container": CHANNEL},
    "click-view-a-string": {"view": "view"},
    "click-team-a-number": {"team": 5},
    "click-authorizations-a-number": {"authorizations": 5},
    "click-nested-authorizations": {"authorizations": [{"authorizations": 5}]},
    "click-response-urls-strings": {"response_urls": ["https://example.com"]},
    "click-message-user-a-number": {"message": {"user": 7, "ts": "1.1"}},
    "click-is-enterprise-install-a-string": {"is_enterprise_install": "yes"},
}

MALFORMED_VIEWS: dict[str, Any] = {
    "view-a-string": "view",
    "view-a-list": ["view"],
    "view-callback-a-number": {"type": "modal", "callback_id": 5},
    "view-without-a-type": {"callback_id": "hb:modal"},
    "view-blocks-a-string": {"type": "modal", "callback_id": "hb:modal", "blocks": "blocks"},
    "view-state-a-list": {"type": "modal", "callback_id": "hb:modal", "state": ["x"]},
    "view-state-values-nested-wrong": {
        "type": "modal",
        "callback_id": "hb:modal",
        "state": {"values": {"b": 1}},
    },
}


@pytest.mark.parametrize("name", MALFORMED_PAYLOADS)
async def test_signed_malformed_clicks_get_400(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        calls = len(h.slack.calls)
        caplog.clear()
        assert await _send(h, _form(_click(**MALFORMED_PAYLOADS[name])), FORM) == 400
        _assert_one_line(caplog)
        await h.bot.drain()
        assert len(h.slack.calls) == calls
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []


@pytest.mark.parametrize("name", MALFORMED_VIEWS)
async def test_signed_malformed_modal_submissions_get_400(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        caplog.clear()
        body = _form(_submission(view=MALFORMED_VIEWS[name]))
        assert await _send(h, body, FORM) == 400
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)


async def test_a_body_that_is_not_utf8_gets_401_even_signed(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with make_bot(agents.memory_agent) as h:
        raw = b'{"type": "event_callback", "x": "\xff"}'
        timestamp = str(int(time.time()))
        digest = hmac.new(
            h.slack.signing_secret.encode(), b"v0:" + timestamp.encode() + b":" + raw, "sha256"
        )
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": f"v0={digest.hexdigest()}",
        }
        url = h.slack.bot_url
        assert url is not None
        caplog.clear()
        async with (
            aiohttp.ClientSession() as session,
            session.post(url, data=raw, headers=headers) as response,
        ):
            assert response.status == 401
        _assert_one_line(caplog)


async def test_a_challenge_that_is_not_a_string_gets_400(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        body = json.dumps({"type": "url_verification", "challenge": {"x": 1}})
        assert await _send(h, body) == 400


@pytest.mark.parametrize(
    "payload",
    [
        {"type": "view_closed", "view": {"type": "modal", "callback_id": "hb:modal"}},
        {"type": "shortcut", "callback_id": "x"},
        _click(actions=[{"action_id": "other", "block_id": "b"}]),
        _submission(view={"type": "modal", "callback_id": "someone-else"}),
    ],
    ids=["view-closed", "shortcut", "not-our-button", "not-our-view"],
)
async def test_payloads_no_listener_takes_are_acked_quietly(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, payload: dict[str, Any]
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        caplog.clear()
        assert await _send(h, _form(payload), FORM) == 200
        assert _logged(caplog) == []
        await _nothing_happened(h, calls)


# ---------------------------------------------------- events: an ack, one line, no prompt


def _mention(h: Harness, **changes: Any) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": ALICE,
        "text": f"<@{h.slack.bot_user_id}> deploy",
        "ts": "1700000000.000100",
        "channel": CHANNEL,
        "channel_type": "channel",
    }
    return {**event, **changes}


WRONG_EVENT_FIELDS: dict[str, dict[str, Any]] = {
    "subtype-a-list": {"subtype": ["file_share"]},
    "subtype-a-dict": {"subtype": {"a": 1}},
    "user-a-list": {"user": [ALICE]},
    "user-a-dict": {"user": {"id": ALICE}},
    "ts-a-float": {"ts": 1700000000.0001},
    "thread-ts-a-number": {"thread_ts": 17},
    "channel-a-dict": {"channel": {"id": CHANNEL}},
    "text-a-list": {"text": ["deploy"]},
    "channel-type-a-number": {"channel_type": 1},
    "bot-profile-a-string": {"bot_profile": "bot"},
    "bot-id-true": {"bot_id": True},
    "message-a-string": {"message": "x"},
}


@pytest.mark.parametrize("name", WRONG_EVENT_FIELDS)
async def test_events_with_fields_of_the_wrong_type_are_acked_not_prompts(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    async with make_bot(agents.approval_agent) as h:
        calls = len(h.slack.calls)
        envelope = h.slack.event_envelope(_mention(h, **WRONG_EVENT_FIELDS[name]))
        caplog.clear()
        assert await _send(h, json.dumps(envelope)) == 200
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)
        assert await h.store.get_thread_run(CHANNEL, "1700000000.000100") is None


@pytest.mark.parametrize(
    "changes",
    [{"event": "app_mention"}, {"event": []}, {"event": {"type": 5}}, {"event_id": 5}],
    ids=["event-a-string", "event-a-list", "event-type-a-number", "event-id-a-number"],
)
async def test_event_envelopes_that_do_not_fit_are_acked(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture, changes: dict[str, Any]
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        envelope = {**h.slack.event_envelope(_mention(h)), **changes}
        caplog.clear()
        assert await _send(h, json.dumps(envelope)) == 200
        _assert_one_line(caplog)
        await _nothing_happened(h, calls)


async def test_a_well_formed_mention_still_starts_a_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        envelope = h.slack.event_envelope(_mention(h))
        assert await _send(h, json.dumps(envelope)) == 200
        await h.bot.drain()
        posted = [c.args.get("text") for c in calls_to(h.slack, "chat.postMessage")]
        assert "I have heard: deploy" in posted


async def test_socket_mode_payloads_go_through_the_same_models(
    slack: TestSlack, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
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
        SlackBot(agent=agents.approval_agent, store=store, settings=settings, loops=False) as bot,
    ):
        connection = asyncio.create_task(bot.run_socket_mode(slack.app_token, stop))
        try:
            await slack.wait_for(lambda: slack.socket_connected)
            h = Harness(slack=slack, bot=bot, store=store, clock=Clock())
            calls = len(slack.calls)
            caplog.clear()
            for changes in WRONG_EVENT_FIELDS.values():
                assert (await slack.send_event(_mention(h, **changes))).status == 200
            for view in MALFORMED_VIEWS.values():
                response = await slack.send_interactivity(_submission(view=view))
                assert response.status == 200
            for changes in MALFORMED_PAYLOADS.values():
                assert (await slack.send_interactivity(_click(**changes))).status == 200
            await bot.drain()
            expected = len(WRONG_EVENT_FIELDS) + len(MALFORMED_VIEWS) + len(MALFORMED_PAYLOADS)
            assert len(_logged(caplog)) == expected
            assert "Traceback" not in caplog.text
            assert len(slack.calls) == calls
            assert slack.bot_messages() == []
        finally:
            stop.set()
            await connection


@pytest.mark.parametrize("view", MALFORMED_VIEWS.values(), ids=list(MALFORMED_VIEWS))
async def test_checking_a_submission_never_raises(make_bot: BotFactory, view: Any) -> None:
    async with make_bot(agents.memory_agent) as h:
        for body in (_submission(view=view), {"user": "U1", "view": view}, {"view": view}):
            check = await h.bot.answers.check_submission(body)
            assert check.record is None
            assert check.errors or check.notice


# ------------------------------------------------------------------ the channel of a click


async def _approve_with(h: Harness, edit: Any) -> tuple[str, int]:
    asked = await h.mention(ALICE, "deploy")
    card = h.card(asked.ts)
    payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
    edit(payload)
    status = (await h.slack.send_interactivity(payload)).status
    await h.bot.drain()
    return h.interaction_id(card), status


def _container_elsewhere(payload: dict[str, Any]) -> None:
    del payload["channel"]
    payload["container"]["channel_id"] = OTHER_CHANNEL


def _channel_here_container_elsewhere(payload: dict[str, Any]) -> None:
    payload["container"]["channel_id"] = OTHER_CHANNEL


def _channel_elsewhere_container_here(payload: dict[str, Any]) -> None:
    payload["channel"] = {"id": OTHER_CHANNEL}


def _no_channel_at_all(payload: dict[str, Any]) -> None:
    del payload["channel"]
    payload["container"].pop("channel_id", None)


@pytest.mark.parametrize(
    "edit",
    [
        _container_elsewhere,
        _channel_here_container_elsewhere,
        _channel_elsewhere_container_here,
        _no_channel_at_all,
    ],
)
async def test_an_approval_clicked_from_another_channel_is_refused(
    make_bot: BotFactory, edit: Any
) -> None:
    async with make_bot(agents.approval_agent) as h:
        interaction_id, status = await _approve_with(h, edit)
        assert status == 200
        stored = await h.store.get_interaction(interaction_id)
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert refused and refused[-1].user == BOB


async def test_a_question_answered_from_another_channel_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_CONFIRM)
        _container_elsewhere(payload)
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert h.texts(asked.ts) == []
        assert "does not belong" in h.ephemerals(BOB)[-1]


async def test_a_click_naming_only_the_container_channel_is_taken(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:

        def container_only(payload: dict[str, Any]) -> None:
            del payload["channel"]

        interaction_id, _ = await _approve_with(h, container_only)
        stored = await h.store.get_interaction(interaction_id)
        assert stored is not None and stored.status == "answered"
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
