"""LocalSlack itself: the Web API it serves to a real slack_sdk client, and its change feed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.models.messages.chunk import MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from .._local_slack import TestSlack
from .conftest import ALICE, CHANNEL


def _client(slack: TestSlack, token: str | None = None) -> AsyncWebClient:
    return AsyncWebClient(
        token=token or slack.bot_token,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=1)],
    )


async def test_web_api_round_trip(slack: TestSlack) -> None:
    client = _client(slack)
    assert (await client.auth_test())["user_id"] == slack.bot_user_id
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x"}}
    posted = await client.chat_postMessage(channel=CHANNEL, text="hi", blocks=[section])
    ts = posted["ts"]
    await client.chat_update(channel=CHANNEL, ts=ts, text="edited", blocks=[])
    message = slack.message(CHANNEL, ts)
    assert message is not None and message.text == "edited" and message.blocks == []
    await client.reactions_add(channel=CHANNEL, timestamp=ts, name="eyes")
    assert message.reactions == {"eyes": [slack.bot_user_id]}
    await client.reactions_remove(channel=CHANNEL, timestamp=ts, name="eyes")
    replies = await client.conversations_replies(channel=CHANNEL, ts=ts)
    assert [m["ts"] for m in replies["messages"]] == [ts]
    assert (await client.usergroups_users_list(usergroup="S0OPS"))["users"] == ["U0BOB", "U0CAROL"]
    assert (await client.users_info(user=ALICE))["user"]["name"] == "alice"
    await client.chat_postEphemeral(channel=CHANNEL, user=ALICE, text="psst")
    assert [e.text for e in slack.ephemerals_for(ALICE)] == ["psst"]
    await client.chat_delete(channel=CHANNEL, ts=ts)
    assert slack.message(CHANNEL, ts) is None


async def test_errors_as_slack_gives_them(slack: TestSlack) -> None:
    client = _client(slack)
    for call, error in [
        (client.api_call("no.such.method"), "unknown_method"),
        (client.chat_postMessage(channel="C0NOPE", text="x"), "channel_not_found"),
        (client.views_open(trigger_id="made-up", view={"type": "modal"}), "invalid_trigger_id"),
        (_client(slack, "xoxb-wrong").auth_test(), "invalid_auth"),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await call
        assert caught.value.response["error"] == error


async def test_rate_limit_once_then_ok(slack: TestSlack) -> None:
    slack.fail_next("chat.postMessage", status=429, retry_after=0)
    await _client(slack).chat_postMessage(channel=CHANNEL, text="eventually")
    assert [c.status for c in slack.calls if c.method == "chat.postMessage"] == [429, 200]
    assert [m.text for m in slack.messages] == ["eventually"]


@dataclass
class _Endpoint:
    """A stand-in bot endpoint that answers 200 and keeps each request's headers and body."""

    url: str = ""
    requests: list[tuple[dict[str, str], str]] = field(default_factory=list)

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        self.requests.append((dict(request.headers), await request.text()))
        return aiohttp.web.Response(status=200)


@asynccontextmanager
async def _endpoints(count: int) -> AsyncIterator[list[_Endpoint]]:
    endpoints = [_Endpoint() for _ in range(count)]
    runners: list[aiohttp.web.AppRunner] = []
    try:
        for endpoint in endpoints:
            app = aiohttp.web.Application()
            app.router.add_post("/slack/events", endpoint.handle)
            runner = aiohttp.web.AppRunner(app)
            runners.append(runner)
            await runner.setup()
            site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            endpoint.url = f"http://127.0.0.1:{port}/slack/events"
        yield endpoints
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_events_reach_the_bot_signed(slack: TestSlack) -> None:
    async with _endpoints(1) as [bot]:
        slack.bot_url = bot.url
        message = await slack.post_user_message(ALICE, CHANNEL, "hello")
        verifier = SignatureVerifier(slack.signing_secret)
        kinds = []
        for headers, body in bot.requests:
            assert verifier.is_valid_request(body, headers)
            envelope = json.loads(body)
            assert envelope["type"] == "event_callback" and envelope["event_id"]
            assert envelope["authorizations"][0]["user_id"] == slack.bot_user_id
            kinds.append(envelope["event"]["type"])
        assert kinds == ["app_mention", "message"]
        assert message.text == f"<@{slack.bot_user_id}> hello"


async def test_deliveries_to_several_bot_processes(slack: TestSlack) -> None:
    async with _endpoints(2) as bots:
        first, second = (bot.url for bot in bots)
        slack.bot_urls = [first, second]
        assert slack.bot_url == first
        asked = await slack.post_user_message(ALICE, CHANNEL, "x", deliver=False)
        event = slack.events_for(asked)[0]
        # By default each delivery goes to the next endpoint in turn.
        turns = [(await slack.send_event(event)).url for _ in range(4)]
        assert turns == [first, second, first, second]
        assert [len(bot.requests) for bot in bots] == [2, 2]

        assert (await slack.send_event(event, to=1)).url == second
        assert [len(bot.requests) for bot in bots] == [2, 3]

        both = await slack.send_event(event, event_id="EvSAME", to="all")
        assert [(r.url, r.status) for r in both.each] == [(first, 200), (second, 200)]
        assert (both.url, both.status) == (first, 200)
        verifier = SignatureVerifier(slack.signing_secret)
        (head_a, body_a), (head_b, body_b) = (bot.requests[-1] for bot in bots)
        assert body_a == body_b and json.loads(body_a)["event_id"] == "EvSAME"
        assert verifier.is_valid_request(body_a, head_a)
        assert verifier.is_valid_request(body_b, head_b)

        slack.route = 0
        assert (await slack.send_event(event)).url == first
        with pytest.raises(IndexError):
            await slack.send_event(event, to=2)
        slack.bot_url = None
        with pytest.raises(RuntimeError, match="bot_url"):
            await slack.send_event(event)


async def test_wait_for_and_change_feed(slack: TestSlack) -> None:
    feed = slack.subscribe()
    client = _client(slack)

    async def later() -> None:
        await asyncio.sleep(0)
        await client.chat_postMessage(channel=CHANNEL, text="ping")

    task = asyncio.create_task(later())
    found = await slack.wait_for(lambda: [m for m in slack.messages if m.text == "ping"], timeout=5)
    await task
    assert found[0].bot_id == slack.bot_id
    kinds = []
    while not feed.empty():
        kinds.append(feed.get_nowait().kind)
    assert "message" in kinds
    slack.unsubscribe(feed)
    with pytest.raises(TimeoutError):
        await slack.wait_for(lambda: False, timeout=0.05)
    snapshot = slack.snapshot()
    json.dumps(snapshot)
    assert snapshot["messages"][-1]["text"] == "ping"


async def test_closed_local_slack_cannot_restart() -> None:
    slack = TestSlack()
    async with slack:
        pass
    await slack.aclose()
    with pytest.raises(RuntimeError):
        await slack.start()


async def test_agent_session_and_stream_methods(slack: TestSlack) -> None:
    slack.agent_refusal = None  # declared as an agent
    client = _client(slack)
    asked = await slack.post_user_message(ALICE, CHANNEL, "deploy", deliver=False)
    await client.agents_sessions_setStatus(
        channel_id=CHANNEL,
        thread_ts=asked.ts,
        status="processing",
        title="deploy",
        initiator_user_id=ALICE,
    )
    started = await client.chat_startStream(
        channel=CHANNEL,
        thread_ts=asked.ts,
        recipient_user_id=ALICE,
        recipient_team_id=slack.team_id,
        chunks=[TaskUpdateChunk(id="t1", title="deploy", status="in_progress")],
    )
    ts = started["ts"]
    await client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="Hello ")
    await client.chat_appendStream(
        channel=CHANNEL,
        ts=ts,
        chunks=[
            MarkdownTextChunk(text="world"),
            TaskUpdateChunk(id="t1", title="deploy", status="complete", output="ok"),
        ],
    )
    await client.chat_stopStream(channel=CHANNEL, ts=ts, session_status="active")
    message = slack.message(CHANNEL, ts)
    assert message is not None and message.text == "Hello world" and not message.streaming
    assert message.tasks()["t1"]["status"] == "complete"
    session = slack.sessions[(CHANNEL, asked.ts)]
    assert (session.title, session.initiator_user_id) == ("deploy", ALICE)
    assert session.history == ["processing", "active"]

    for call, error in [
        (
            client.chat_appendStream(channel=CHANNEL, ts=ts, markdown_text="late"),
            "message_not_in_streaming_state",
        ),
        (client.chat_startStream(channel=CHANNEL, thread_ts=asked.ts), "missing_recipient_user_id"),
        (
            client.chat_startStream(
                channel=CHANNEL,
                thread_ts=asked.ts,
                recipient_user_id=ALICE,
                recipient_team_id=slack.team_id,
                chunks=[{"type": "task_update", "id": "t", "title": "x", "status": "done"}],
            ),
            "invalid_chunks",
        ),
        (
            client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=asked.ts, status="busy"),
            "invalid_status",
        ),
    ]:
        with pytest.raises(SlackApiError) as caught:
            await call
        assert caught.value.response["error"] == error


@pytest.mark.parametrize("refusal", ["not_authorized", "missing_scope", "unknown_method"])
async def test_an_app_not_declared_as_an_agent_is_refused(slack: TestSlack, refusal: str) -> None:
    slack.agent_refusal = refusal
    client = _client(slack)
    asked = await slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
    with pytest.raises(SlackApiError) as caught:
        await client.agents_sessions_setStatus(
            channel_id=CHANNEL, thread_ts=asked.ts, status="processing"
        )
    assert caught.value.response["error"] == refusal
    assert (await client.chat_postMessage(channel=CHANNEL, text="still fine"))["ok"]


async def test_views_publish_keeps_a_valid_home_view_per_person(slack: TestSlack) -> None:
    client = _client(slack)
    section = {"type": "section", "text": {"type": "mrkdwn", "text": "x"}}
    view = {"type": "home", "blocks": [section]}
    published = await client.views_publish(user_id=ALICE, view=view)
    assert published["view"]["type"] == "home"
    assert slack.home_view(ALICE) == view
    assert slack.home_view("U0BOB") is None

    too_long = {"type": "home", "blocks": [section] * 101}
    not_home = {"type": "modal", "blocks": [section]}
    bad_block = {"type": "home", "blocks": [{"type": "section", "text": {"type": "mrkdwn"}}]}
    long_header = {
        "type": "home",
        "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "x" * 151}}],
    }
    for refused in (too_long, not_home, bad_block, long_header):
        with pytest.raises(SlackApiError) as caught:
            await client.views_publish(user_id=ALICE, view=refused)
        assert caught.value.response["error"] == "invalid_arguments"
    with pytest.raises(SlackApiError) as unknown:
        await client.views_publish(user_id="U0NOBODY", view=view)
    assert unknown.value.response["error"] == "user_not_found"
    assert slack.home_view(ALICE) == view  # a refused view changes nothing


async def test_conversations_members_pages_a_channels_members_as_slack_does(
    slack: TestSlack,
) -> None:
    client = _client(slack)
    slack.add_channel("C0SECRET", "secret", private=True, members=["U0ALICE", "U0BOB"])
    everyone = (await client.conversations_members(channel=CHANNEL))["members"]
    assert set(everyone) == set(slack.users)
    first = await client.conversations_members(channel="C0SECRET", limit=2)
    assert first["members"] == ["U0ALICE", "U0BOB"]
    cursor = first["response_metadata"]["next_cursor"]
    rest = await client.conversations_members(channel="C0SECRET", limit=2, cursor=cursor)
    assert rest["members"] == [slack.bot_user_id]
    assert rest["response_metadata"]["next_cursor"] == ""
    info = (await client.conversations_info(channel="C0SECRET"))["channel"]
    assert info["is_private"] and info["is_group"] and not info["is_channel"]
    assert (await client.conversations_info(channel=CHANNEL))["channel"]["is_channel"]
    dm = slack.dm_channel(ALICE)
    slack.scopes.append("im:read")
    assert (await client.conversations_members(channel=dm))["members"] == [
        ALICE,
        slack.bot_user_id,
    ]
    assert (await client.conversations_info(channel=dm))["channel"]["is_im"]
    slack.leave("C0SECRET", slack.bot_user_id)
    for call, error in [
        (client.conversations_members(channel="C0NOPE"), "channel_not_found"),
        (client.conversations_members(channel="C0SECRET"), "channel_not_found"),
        (client.conversations_info(channel="C0SECRET"), "channel_not_found"),
        (client.conversations_members(channel=CHANNEL, cursor="bm9wZQ=="), "invalid_cursor"),
        (client.conversations_members(channel=CHANNEL, limit=0), "invalid_limit"),
    ]:
        with pytest.raises(SlackApiError) as raised:
            await call
        assert raised.value.response["error"] == error


async def test_reading_a_conversation_needs_the_scope_of_its_kind(slack: TestSlack) -> None:
    slack.add_channel("C0SECRET", "secret", private=True, members=["U0ALICE"])
    slack.scopes.remove("groups:read")
    for channel in ["C0SECRET", slack.dm_channel(ALICE)]:  # the bot has no im:read
        with pytest.raises(SlackApiError) as raised:
            await _client(slack).conversations_members(channel=channel)
        assert raised.value.response["error"] == "missing_scope"
    assert (await _client(slack).conversations_members(channel=CHANNEL))["members"]
