"""What Slack really does, and the bot handles: the `ssl_check` of a command's Request URL, the
`stopped_by_user` of a stream after the stop button (in a turn, and through the bot during a
streamed answer), `chat.update`'s text limit, rate-limited stream starts, response URLs that
only Slack's own host answers, and the mrkdwn a cancel reason may keep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import Agent, ModelResponse
from bot.events import OutputEvent

# The bot's Slack client and agent turn, driven directly against what Slack really answers.
from bot.slack._chat import MAX_UPDATE_TEXT, Chat
from bot.slack._session import FLUSH_CHARS, AgentTurn
from state import open_store

from .._local_slack import Message, TestSlack
from . import agents
from .conftest import ALICE, CHANNEL, BotFactory

FORM = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize("signed", [True, False])
async def test_ssl_check_gets_an_empty_200_and_runs_nothing(
    make_bot: BotFactory, signed: bool
) -> None:
    async with make_bot(agents.approval_agent) as h:
        calls = len(h.slack.calls)
        body = urlencode({"token": "legacy-verification-token", "ssl_check": "1"})
        response = await h.slack.send_raw(body, headers=FORM, sign=signed)
        await h.bot.drain()
        assert (response.status, response.body) == (200, "")
        assert len(h.slack.calls) == calls
        assert h.slack.bot_messages() == [] and h.slack.ephemerals == []


async def test_a_command_that_says_ssl_check_is_no_ssl_check(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        body = urlencode({"command": "/deploy", "ssl_check": "1", "user_id": ALICE})
        assert (await h.slack.send_raw(body, headers=FORM, sign=False)).status == 401


def _client(slack: TestSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


async def test_a_stream_stopped_by_the_stop_button_ends_quietly_without_a_repost(
    slack: TestSlack, sqlite_store_url: str
) -> None:
    slack.agent_refusal = None
    asked = await slack.post_user_message(ALICE, CHANNEL, "restart api", deliver=False)
    chat = Chat(_client(slack), ui="agent")
    async with open_store(sqlite_store_url) as store:
        turn = AgentTurn(
            chat=chat,
            store=store,
            channel=CHANNEL,
            thread_ts=asked.ts,
            recipient=ALICE,
            run_id=None,
            clock=lambda: 0.0,
        )
        await turn.begin()
        await turn.text("Restarting api")
        await turn.flush()
        streamed = slack.message(CHANNEL, str(turn.ts))
        assert streamed is not None and streamed.streaming
        assert await slack.stop_streams(CHANNEL, asked.ts) == [streamed.ts]  # the stop button

        await turn.text(" ... still going")
        await turn.flush()
        assert await turn.finish("active")
    with pytest.raises(SlackApiError) as caught:
        await _client(slack).chat_appendStream(channel=CHANNEL, ts=streamed.ts, markdown_text="x")
    assert caught.value.response["error"] == "stopped_by_user"
    replies = slack.bot_messages(CHANNEL, asked.ts)
    assert [m.ts for m in replies] == [streamed.ts]  # the answer is not posted again
    assert streamed.text == "Restarting api"
    assert slack.sessions[(CHANNEL, asked.ts)].status == "active"


async def test_chat_update_keeps_to_slacks_text_limit(slack: TestSlack) -> None:
    client = _client(slack)
    posted = await client.chat_postMessage(channel=CHANNEL, text="card")
    with pytest.raises(SlackApiError) as caught:
        await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="x" * 4001)
    assert caught.value.response["error"] == "msg_too_long"

    assert await Chat(client).update(CHANNEL, posted["ts"], "y" * 10_000)
    updated = slack.message(CHANNEL, posted["ts"])
    assert updated is not None and len(updated.text) == MAX_UPDATE_TEXT
    assert updated.text.endswith("…")


async def test_rate_limited_stream_starts_degrade_to_plain_messages(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    """With Slack's rate limits on, 50 agent-session turns in a minute in one workspace: the
    first 20 stream (chat.startStream is Tier 2), the rest answer with a plain message at once
    instead of waiting out Retry-After; every turn gets its answer, none fails."""
    slack.agent_refusal = None
    slack.rate_limits.on = True
    async with make_bot(agents.memory_agent) as h:
        took = []
        for n in range(50):
            started = time.monotonic()
            asked = await h.mention(ALICE, f"turn {n}")
            took.append(time.monotonic() - started)
            [answer] = h.bot_replies(asked.ts)
            assert answer.text == f"I have heard: turn {n}", n
            assert not answer.streaming
    streamed = [c for c in slack.calls if c.method == "chat.startStream"]
    assert [c.status for c in streamed[:21]] == [200] * 20 + [429]
    # After the 429 no start is tried until Retry-After has passed (a minute, unless the
    # machine is so slow that the window rolls over): far fewer than 50.
    assert len(streamed) < 50
    assert max(took) < 10, took
    # chat.postMessage's own limit (about one a second per channel) is waited out: Retry-After 1.
    posts = [c.status for c in slack.calls if c.method == "chat.postMessage"]
    assert posts.count(200) == 30 and set(posts) <= {200, 429}


class _HaltingModel:
    """Streams the start of its answer, then waits (as a slow model does) until released."""

    name = "halting"

    def __init__(self) -> None:
        self.streamed = asyncio.Event()
        self.release = asyncio.Event()

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        yield "Restarting api" + " ." * (FLUSH_CHARS // 2)  # enough to be sent at once
        self.streamed.set()
        await self.release.wait()
        yield " and it is back"
        yield ModelResponse(text="Restarting api and it is back")


async def test_a_stop_during_a_streamed_answer_ends_it_once_through_the_bot(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    slack.agent_refusal = None
    model = _HaltingModel()
    async with make_bot(Agent(name="halting", model=model)) as h:
        asked = await slack.post_user_message(ALICE, CHANNEL, "restart api")
        await asyncio.wait_for(model.streamed.wait(), timeout=10)

        async def streaming() -> Message:
            while True:
                found = [m for m in slack.bot_messages(CHANNEL, asked.ts) if m.streaming]
                if found and "Restarting api" in found[0].text:
                    return found[0]
                await asyncio.sleep(0.01)

        streamed = await asyncio.wait_for(streaming(), timeout=10)
        assert (await slack.press_stop(ALICE, CHANNEL, asked.ts)).status == 200
        await asyncio.wait_for(h.bot.drain(), timeout=10)
        model.release.set()
        await asyncio.sleep(0.05)
        await h.bot.drain()
    assert not streamed.streaming and streamed.stopped_by_user
    replies = slack.bot_messages(CHANNEL, asked.ts)
    assert sum("Restarting api" in m.text for m in replies) == 1  # not posted again
    assert "and it is back" not in " ".join(m.text for m in replies)
    assert replies[-1].text == f"Stopped by <@{ALICE}>."
    assert slack.sessions[(CHANNEL, asked.ts)].status == "active"  # out of `processing`


async def test_a_response_url_is_answered_only_at_slack(slack: TestSlack) -> None:
    # The bot's Slack client itself: its check of a response_url has no public entry point.
    chat = Chat(_client(slack))
    assert await chat.respond(slack.response_url(CHANNEL, ALICE), "to Slack")
    assert [e.text for e in slack.ephemerals_for(ALICE)] == ["to Slack"]
    async with TestSlack() as elsewhere:
        other = elsewhere.response_url(CHANNEL, ALICE)
        assert not await chat.respond(other, "to someone else")
        assert elsewhere.ephemerals == []
    for hostile in (
        "http://hooks.slack.com/commands/T0/1/x",
        "https://hooks.slack.com.evil.example/commands/T0/1/x",
        "https://user@hooks.slack.com/commands/T0/1/x",
        "not a url",
    ):
        assert not await chat.respond(hostile, "no")


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("stopped by <@U0BOB>", "Stopped (stopped by <@U0BOB>)."),
        ("<!channel> please", "Stopped (&lt;!channel&gt; please)."),
        ("<@U0BOB|bob> <http://evil|ok>", "Stopped (&lt;@U0BOB|bob&gt; &lt;http://evil|ok&gt;)."),
        ("<@u0bob> <#C0GENERAL>", "Stopped (&lt;@u0bob&gt; &lt;#C0GENERAL&gt;)."),
    ],
)
def test_a_cancel_reason_keeps_only_plain_user_mentions(reason: str, shown: str) -> None:
    # The reply a run's end makes, as a unit: Slack renders `<!channel>` as a ping and
    # `<http://…|ok>` as a disguised link, so only a plain user mention may survive a reason.
    from bot.slack._drive import _reply_text

    output = OutputEvent.model_validate(
        {
            "run_id": "r",
            "path": "a",
            "t0": 0,
            "t1": 1,
            "status": {"code": "cancelled", "reason": "cancelled", "message": reason},
        }
    )
    assert _reply_text(output) == shown
