"""LocalSlack finds a message by its channel and ts, and a thread's messages, from an index kept
as messages are posted, edited and deleted: the same answers a scan of every message gave, in
the order they were posted."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.playground import LocalSlack

from .._local_slack import Message

pytestmark = pytest.mark.quick

GENERAL = "C0GENERAL"
DEPLOYS = "C0DEPLOYS"


@pytest.fixture
async def slack() -> AsyncIterator[LocalSlack]:
    async with LocalSlack() as slack:
        yield slack


def _client(slack: LocalSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


def _scan_thread(slack: LocalSlack, channel: str, thread_ts: str) -> list[Message]:
    """What a thread was before the index: every message, in order, that is in it."""
    return [
        m
        for m in slack.messages
        if m.channel == channel and (m.ts == thread_ts or m.thread_ts == thread_ts)
    ]


def test_a_message_is_found_by_channel_and_ts_and_by_ts_alone() -> None:
    slack = LocalSlack()
    first = Message(channel=GENERAL, ts="1.000001", text="one", user="U0ALICE")
    elsewhere = Message(channel=DEPLOYS, ts="1.000002", text="two", user="U0BOB")
    slack.messages.append(first)
    slack.messages.append(elsewhere)
    assert slack.message(GENERAL, "1.000001") is first
    assert slack.message(DEPLOYS, "1.000002") is elsewhere
    assert slack.message(DEPLOYS, "1.000001") is None  # the ts, but in another channel
    assert slack.message(GENERAL, "9.999999") is None
    assert slack.find_message("1.000002") is elsewhere
    assert slack.find_message("9.999999") is None
    assert list(slack.messages) == [first, elsewhere]
    assert len(slack.messages) == 2 and slack.messages[-1] is elsewhere


def test_two_messages_at_one_ts_answer_the_first_posted_until_it_goes() -> None:
    slack = LocalSlack()
    here = Message(channel=GENERAL, ts="1.5", text="first", user="U0ALICE")
    there = Message(channel=DEPLOYS, ts="1.5", text="second", user="U0BOB")
    slack.messages.append(here)
    slack.messages.append(there)
    assert slack.find_message("1.5") is here
    slack.messages.remove(here)
    assert slack.find_message("1.5") is there
    assert slack.message(GENERAL, "1.5") is None


async def test_thread_replies_come_parent_first_in_the_order_posted(slack: LocalSlack) -> None:
    client = _client(slack)
    parent = (await client.chat_postMessage(channel=GENERAL, text="parent"))["ts"]
    other = (await client.chat_postMessage(channel=GENERAL, text="another thread"))["ts"]
    replies = []
    for n in range(3):
        posted = await client.chat_postMessage(channel=GENERAL, text=f"r{n}", thread_ts=parent)
        replies.append(posted["ts"])
        # Replies in another thread, and a person's reply, interleave with this thread's.
        await client.chat_postMessage(channel=GENERAL, text=f"o{n}", thread_ts=other)
    await slack.post_user_message(
        "U0ALICE", GENERAL, "mine", thread_ts=parent, mention=False, deliver=False
    )
    thread = slack.thread(GENERAL, parent)
    assert [m.text for m in thread] == ["parent", "r0", "r1", "r2", "mine"]
    assert thread == _scan_thread(slack, GENERAL, parent)
    assert [m.text for m in slack.thread(GENERAL, other)] == ["another thread", "o0", "o1", "o2"]
    answered = await client.conversations_replies(channel=GENERAL, ts=parent)
    assert [m["ts"] for m in answered["messages"]][:4] == [parent, *replies]
    assert slack.thread(DEPLOYS, parent) == []


async def test_an_edited_message_is_found_as_edited(slack: LocalSlack) -> None:
    client = _client(slack)
    parent = (await client.chat_postMessage(channel=GENERAL, text="parent"))["ts"]
    reply = (await client.chat_postMessage(channel=GENERAL, text="draft", thread_ts=parent))["ts"]
    await client.chat_update(channel=GENERAL, ts=reply, text="final")
    found = slack.message(GENERAL, reply)
    assert found is not None and found.text == "final" and found.edited
    assert [m.text for m in slack.thread(GENERAL, parent)] == ["parent", "final"]


async def test_a_deleted_message_is_gone_from_every_lookup(slack: LocalSlack) -> None:
    client = _client(slack)
    parent = (await client.chat_postMessage(channel=GENERAL, text="parent"))["ts"]
    first = (await client.chat_postMessage(channel=GENERAL, text="a", thread_ts=parent))["ts"]
    second = (await client.chat_postMessage(channel=GENERAL, text="b", thread_ts=parent))["ts"]
    await client.chat_delete(channel=GENERAL, ts=first)
    assert slack.message(GENERAL, first) is None
    assert slack.find_message(first) is None
    assert [m.ts for m in slack.thread(GENERAL, parent)] == [parent, second]
    await client.chat_delete(channel=GENERAL, ts=parent)
    # The replies stay, as in Slack; the thread is what is left of it.
    assert [m.ts for m in slack.thread(GENERAL, parent)] == [second]
    assert [m.ts for m in slack.messages] == [second]
    slack.messages.clear()
    assert slack.find_message(second) is None and slack.thread(GENERAL, parent) == []
    with pytest.raises(ValueError):
        slack.messages.remove(Message(channel=GENERAL, ts=second))
