"""LocalSlack refuses what Slack refuses, over real HTTP with slack_sdk's client: every card kind
handback renders, at its extremes, is accepted on every method that sends it; a payload one past
each limit of the table (`bot.playground._limits.LIMITS`) and of Block Kit is refused with
Slack's error name and `response_metadata.messages`; missing scopes, expired triggers, the
rate-limit profile and the stop button answer as Slack does."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import blocks
from bot.playground import LocalSlack, Playground

# The limits table and the stored message model: each row is checked against the wire.
from bot.playground._limits import LIMITS
from bot.playground._workspace_model import Message
from tests.blocks._factory import TEXTS, adversarial_records, approval, ask

CHANNEL = "C0GENERAL"
ALICE = "U0ALICE"


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    async with LocalSlack(agent_view=True) as local:
        yield local


def _client(slack: LocalSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def _refused(call: Awaitable[Any]) -> dict[str, Any]:
    with pytest.raises(SlackApiError) as caught:
        await call
    return dict(caught.value.response.data)  # type: ignore[arg-type]


def _section(chars: int) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}


def _select(options: int) -> dict[str, Any]:
    return {
        "type": "actions",
        "elements": [
            {
                "type": "static_select",
                "action_id": "pick",
                "options": [
                    {"text": {"type": "plain_text", "text": f"o{i}"}, "value": f"v{i}"}
                    for i in range(options)
                ],
            }
        ],
    }


def _modal(title: str = "Title", blocks_: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": "hb_modal",
        "title": {"type": "plain_text", "text": title},
        "blocks": blocks_ if blocks_ is not None else [_section(10)],
    }


def test_every_limit_of_the_table_cites_its_source() -> None:
    for limit in LIMITS:
        assert limit.source.startswith("docs.slack.dev/"), limit
        assert limit.figure > 0 and limit.error


@pytest.mark.parametrize("text", sorted(TEXTS))
async def test_every_card_kind_at_its_extremes_is_accepted(slack: LocalSlack, text: str) -> None:
    client = _client(slack)
    records = adversarial_records(TEXTS[text])
    for name, record in records.items():
        card = blocks.render_card(record, approvers=["U0BOB", "S0OPS"])
        posted = await client.chat_postMessage(channel=CHANNEL, **card)
        assert posted["ok"], name
        answered = replace(
            record, status="answered", answer=None, answered_by="U0BOB", answered_at=1.0
        )
        closed = replace(record, status="expired")
        for later in (blocks.render_answered(answered), blocks.render_closed(closed)):
            updated = await client.chat_update(channel=CHANNEL, ts=posted["ts"], **later)
            assert updated["ok"], name
        await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, **card)
        for modal in (blocks.render_modal(record), blocks.render_edit_modal(record)):
            if modal is not None:
                trigger = slack.new_trigger_id()
                slack.triggers[trigger] = ALICE
                opened = await client.views_open(trigger_id=trigger, view=modal)
                assert opened["ok"], name
                await client.views_update(view_id=opened["view"]["id"], view=modal)
    home = blocks.render_home(waiting=list(records.values()) * 5, decided=[], grants=[])
    assert (await client.views_publish(user_id=ALICE, view=home))["ok"]


async def test_long_arguments_and_a_two_person_rule_fit(slack: LocalSlack) -> None:
    client = _client(slack)
    arguments = {f"arg{i}": "v" * 5000 for i in range(40)}
    record = approval(arguments)
    record.payload["rule"] = {"count": 2}
    for page in range(3):
        card = blocks.render_card(record, page=page)
        assert (await client.chat_postMessage(channel=CHANNEL, **card))["ok"]
    big = ask("Which one? " * 400, [f"choice {i} " + "y" * 70 for i in range(300)])
    assert (await client.chat_postMessage(channel=CHANNEL, **blocks.render_card(big)))["ok"]


async def test_one_past_each_message_limit_is_invalid_blocks(slack: LocalSlack) -> None:
    client = _client(slack)
    posted = await client.chat_postMessage(channel=CHANNEL, text="card")
    ts = posted["ts"]
    for call in (
        client.chat_postMessage(channel=CHANNEL, text="x", blocks=[_section(1)] * 51),
        client.chat_postMessage(channel=CHANNEL, text="x", blocks=[_section(3001)]),
        client.chat_update(channel=CHANNEL, ts=ts, text="x", blocks=[_select(101)]),
        client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="x", blocks=[_section(3001)]),
        client.chat_postMessage(
            channel=CHANNEL,
            text="x",
            blocks=[{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}],
        ),
    ):
        refused = await _refused(call)
        assert refused["error"] == "invalid_blocks"
        [message] = refused["response_metadata"]["messages"]
        assert message.startswith("[ERROR] ") and "[json-pointer:/blocks" in message
    # At the limit, each is fine.
    await client.chat_postMessage(channel=CHANNEL, text="x", blocks=[_section(3000)] * 50)
    await client.chat_update(channel=CHANNEL, ts=ts, text="x", blocks=[_select(100)])
    too_long = await _refused(client.chat_update(channel=CHANNEL, ts=ts, text="x" * 4001))
    assert too_long["error"] == "msg_too_long"
    await client.chat_update(channel=CHANNEL, ts=ts, text="x" * 4000)


async def test_one_past_each_view_limit_is_refused(slack: LocalSlack) -> None:
    client = _client(slack)

    def trigger() -> str:
        found = slack.new_trigger_id()
        slack.triggers[found] = ALICE
        return found

    for view in (
        _modal(title="t" * 25),
        _modal(blocks_=[_section(1)] * 101),
        _modal(blocks_=[_section(3001)]),
        {**_modal(), "type": "home"},
    ):
        refused = await _refused(client.views_open(trigger_id=trigger(), view=view))
        assert refused["error"] == "invalid_arguments"
        assert refused["response_metadata"]["messages"][0].startswith("[ERROR] ")
    opened = await client.views_open(trigger_id=trigger(), view=_modal(title="t" * 24))
    view_id = opened["view"]["id"]
    assert (await _refused(client.views_update(view_id=view_id, view=_modal("t" * 25))))[
        "error"
    ] == "invalid_arguments"
    huge = _modal(blocks_=[_section(3000)] * 100)
    huge["private_metadata"] = "m" * 3000
    assert (await _refused(client.views_update(view_id=view_id, view=huge)))[
        "error"
    ] == "view_too_large"
    home = {"type": "home", "blocks": [_section(1)] * 101}
    assert (await _refused(client.views_publish(user_id=ALICE, view=home)))[
        "error"
    ] == "invalid_arguments"


async def test_a_trigger_expires_after_three_seconds(slack: LocalSlack) -> None:
    now = [1_800_000_000.0]
    slack.clock = lambda: now[0]
    client = _client(slack)
    fresh, stale = slack.new_trigger_id(), slack.new_trigger_id()
    slack.triggers[fresh] = slack.triggers[stale] = ALICE
    now[0] += 3.0
    assert (await client.views_open(trigger_id=fresh, view=_modal()))["ok"]
    now[0] += 0.01
    refused = await _refused(client.views_open(trigger_id=stale, view=_modal()))
    assert refused["error"] == "expired_trigger_id"


@pytest.mark.parametrize(
    ("scope", "call"),
    [
        ("users:read", lambda c: c.users_info(user=ALICE)),
        ("chat:write", lambda c: c.chat_postMessage(channel=CHANNEL, text="x")),
        ("reactions:write", lambda c: c.reactions_add(channel=CHANNEL, timestamp="1.2", name="x")),
        ("usergroups:read", lambda c: c.usergroups_users_list(usergroup="S0OPS")),
        ("channels:history", lambda c: c.conversations_replies(channel=CHANNEL, ts="1.2")),
        ("channels:read", lambda c: c.conversations_info(channel=CHANNEL)),
        ("channels:read", lambda c: c.conversations_members(channel=CHANNEL)),
    ],
)
async def test_a_missing_scope_is_named(slack: LocalSlack, scope: str, call: Any) -> None:
    slack.scopes.remove(scope)
    refused = await _refused(call(_client(slack)))
    assert (refused["error"], refused["needed"]) == ("missing_scope", scope)
    provided = refused["provided"].split(",")
    assert scope not in provided and "commands" in provided


async def test_the_rate_limit_profile_answers_429_past_a_methods_tier(slack: LocalSlack) -> None:
    now = [1_800_000_000.0]
    slack.clock = lambda: now[0]
    client = _client(slack)
    asked = await slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
    start = {"channel": CHANNEL, "thread_ts": asked.ts, "recipient_user_id": ALICE}
    start["recipient_team_id"] = slack.team_id
    for _ in range(25):  # the profile is off by default: burst tests are about the engine
        await client.chat_startStream(**start, markdown_text="x")
    slack.rate_limits.on = True
    for _ in range(20):  # Tier 2: 20 a minute
        await client.chat_startStream(**start, markdown_text="x")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_startStream(**start, markdown_text="x")
    assert caught.value.response.status_code == 429
    assert caught.value.response["error"] == "ratelimited"
    assert int(caught.value.response.headers["Retry-After"]) == 60
    assert (await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="x"))["ok"]
    now[0] += 60
    assert (await client.chat_startStream(**start, markdown_text="x"))["ok"]


async def test_stream_errors_are_slacks_own(slack: LocalSlack) -> None:
    client = _client(slack)
    asked = await slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
    started = await client.chat_startStream(
        channel=CHANNEL,
        thread_ts=asked.ts,
        recipient_user_id=ALICE,
        recipient_team_id=slack.team_id,
        markdown_text="x",
    )
    too_long = await _refused(
        client.chat_appendStream(channel=CHANNEL, ts=started["ts"], markdown_text="y" * 12_001)
    )
    assert too_long["error"] == "invalid_chunks"
    assert await slack.stop_streams(CHANNEL, asked.ts) == [started["ts"]]
    stopped = await _refused(
        client.chat_appendStream(channel=CHANNEL, ts=started["ts"], markdown_text="y")
    )
    assert stopped["error"] == "stopped_by_user"
    slack.messages.append(Message(channel=CHANNEL, ts="1.5", text="a person's", user=ALICE))
    theirs = await _refused(client.chat_appendStream(channel=CHANNEL, ts="1.5", markdown_text="y"))
    assert theirs["error"] == "message_not_owned_by_app"
    nobody = await _refused(client.chat_postEphemeral(channel=CHANNEL, user="U0NOBODY", text="x"))
    assert nobody["error"] == "user_not_in_channel"
    unknown = await _refused(client.chat_postMessage(channel=CHANNEL, text="x", thread_ts="1.999"))
    assert unknown["error"] == "invalid_thread_ts"


@pytest.mark.parametrize(
    "body", [b"{not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000], ids=range(3)
)
async def test_the_web_api_answers_a_broken_body_as_slack_does(
    playground: Playground, body: bytes
) -> None:
    slack = playground.slack
    assert slack is not None
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{slack.api_url}chat.postMessage",
            data=body,
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {slack.bot_token}",
            },
        ) as response,
    ):
        assert response.status == 200
        assert await response.json() == {"ok": False, "error": "invalid_json"}
