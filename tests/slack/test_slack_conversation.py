"""Threads as conversations, DMs, de-duplicated deliveries (one message's `app_mention` and
`message` are one run), messages the bot must ignore (edits, other bots, no user), huge texts
cut, and follow-ups kept in order while a run is running."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from blocks import ACTION_APPROVE
from bot import Agent
from bot.testing import FunctionModel

from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, BotFactory, calls_to, model_calls


async def test_mention_answers_in_thread_and_follow_up_remembers(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, "my favourite colour is teal")
        assert h.texts(asked.ts) == ["I have heard: my favourite colour is teal"]
        assert h.slack.bot_messages()[0].thread_ts == asked.ts

        await h.reply(BOB, asked.ts, "and mine is red")
        assert h.texts(asked.ts)[-1] == (
            "I have heard: my favourite colour is teal | and mine is red"
        )
        # A mention inside the thread continues it too (and is taken once, not twice).
        await h.reply(ALICE, asked.ts, "what did we say?", mention=True)
        assert h.texts(asked.ts)[-1].endswith("| and mine is red | what did we say?")
        assert len(h.texts(asked.ts)) == 3


async def test_status_reaction_while_working(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, "hi")
        added = calls_to(h.slack, "reactions.add")
        removed = calls_to(h.slack, "reactions.remove")
        assert [c.args["timestamp"] for c in added] == [asked.ts]
        assert [c.args["timestamp"] for c in removed] == [asked.ts]
        assert h.slack.message(CHANNEL, asked.ts).reactions == {}  # type: ignore[union-attr]


async def test_direct_message_starts_a_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        dm = h.slack.dm_channel(ALICE)
        asked = await h.slack.post_user_message(ALICE, dm, "hello in private")
        await h.bot.drain()
        [answer] = h.slack.bot_messages(channel=dm)
        assert answer.thread_ts == asked.ts
        assert answer.text == "I have heard: hello in private"


async def test_channel_chatter_outside_bot_threads_is_ignored(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        top = await h.slack.post_user_message(ALICE, CHANNEL, "lunch?", mention=False)
        await h.slack.post_user_message(BOB, CHANNEL, "sure", thread_ts=top.ts, mention=False)
        await h.bot.drain()
        assert h.slack.bot_messages() == []
        assert model_calls(agents.memory_agent) == before


async def test_same_event_delivered_twice_starts_one_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        message = await h.slack.post_user_message(ALICE, CHANNEL, "once please", deliver=False)
        mention_event = h.slack.events_for(message)[0]
        assert mention_event["type"] == "app_mention"
        first, retry, retry2 = await asyncio.gather(
            h.slack.send_event(mention_event, event_id="Ev0DUPLICATE"),
            h.slack.send_event(mention_event, event_id="Ev0DUPLICATE", retry_num=1),
            h.slack.send_event(mention_event, event_id="Ev0DUPLICATE", retry_num=2),
        )
        await h.bot.drain()
        assert {first.status, retry.status, retry2.status} == {200}
        assert h.texts(message.ts) == ["I have heard: once please"]
        assert model_calls(agents.memory_agent) == before + 1


async def test_own_and_other_bots_messages_are_ignored(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, "start")
        calls = model_calls(agents.memory_agent)
        replies = len(h.texts(asked.ts))
        base = {"channel": CHANNEL, "thread_ts": asked.ts, "channel_type": "channel"}
        own = {
            "type": "message",
            "user": h.slack.bot_user_id,
            "bot_id": h.slack.bot_id,
            "text": "I have heard: start",
            "ts": "1.000001",
            **base,
        }
        other_bot = {**own, "user": "U0OTHERBOT", "bot_id": "B0OTHER", "ts": "1.000002"}
        edited = {
            "type": "message",
            "subtype": "message_changed",
            "message": {"user": ALICE, "text": "edited"},
            "ts": "1.000003",
            **base,
        }
        for event in (own, other_bot, edited):
            assert (await h.slack.send_event(event)).status == 200
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == calls
        assert len(h.texts(asked.ts)) == replies


async def test_new_message_supersedes_a_pending_question(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        interaction_id = h.interaction_id(card)
        stale_click = h.slack.block_actions_payload(BOB, card.ts, "hb:confirm")
        # Not a free-text question, so the reply continues the conversation instead.
        await h.reply(ALICE, asked.ts, "never mind, do nothing")
        stored = await h.store.get_interaction(interaction_id)
        assert stored is not None and stored.status == "superseded"
        assert "superseded" in str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]
        await h.slack.send_interactivity(stale_click)
        await h.bot.drain()
        assert "moved on" in h.ephemerals(BOB)[-1]


async def test_quick_follow_up_waits_for_the_run_before_it(make_bot: BotFactory) -> None:
    gate = asyncio.Event()

    async def slow_first(messages: list[dict[str, Any]]) -> str:
        said = [str(m["content"]) for m in messages if m["role"] == "user"]
        if len(said) == 1:
            await gate.wait()
        return "heard: " + " | ".join(said)

    agent = Agent(name="slow", model=FunctionModel(slow_first), tools=[])
    async with make_bot(agent) as h:
        asked = await h.slack.post_user_message(ALICE, CHANNEL, "first")
        await h.slack.post_user_message(BOB, CHANNEL, "second", thread_ts=asked.ts, mention=False)
        assert await h.store.inbox_size() == 2  # both recorded before any work ran
        gate.set()
        await h.bot.drain()
        assert h.texts(asked.ts) == ["heard: first", "heard: first | second"]


async def test_an_approval_in_a_dm_says_who_can_approve_it(make_bot: BotFactory) -> None:
    """Nobody but the requester sees a DM: the card comes with a note instead of a dead end."""
    async with make_bot(agents.approval_agent) as h:
        dm = h.slack.dm_channel(ALICE)
        asked = await h.slack.post_user_message(ALICE, dm, "deploy api to prod")
        await h.bot.drain()
        card, note = h.slack.bot_messages(channel=dm)
        assert card.blocks and card.thread_ts == asked.ts
        assert note.thread_ts == asked.ts
        assert "Someone else has to approve this" in note.text
        # The note tells the truth: Alice may deny it here (and nothing else).
        await h.click(ALICE, card.ts, "hb:deny")
        assert h.texts(asked.ts)[-1].startswith("Tool said: Denied")


async def test_no_dm_note_when_the_requester_may_approve(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_ALLOW_SELF_APPROVAL="true") as h:
        dm = h.slack.dm_channel(ALICE)
        await h.slack.post_user_message(ALICE, dm, "deploy api to prod")
        await h.bot.drain()
        assert [bool(m.blocks) for m in h.slack.bot_messages(channel=dm)] == [True]


async def test_no_dm_note_in_a_channel(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        assert [bool(m.blocks) for m in h.bot_replies(asked.ts)] == [True]


async def test_a_group_dm_works_as_a_channel_does(make_bot: BotFactory) -> None:
    """In a group DM (`message.mpim`), as in a channel: a mention starts a conversation, a reply
    in its thread continues it, chatter outside the bot's threads is ignored, and an approval
    there is answered by someone else in the group."""
    async with make_bot(agents.memory_agent) as h:
        h.slack.add_group_dm("G0TRIO", [ALICE, BOB, CAROL])
        asked = await h.slack.post_user_message(ALICE, "G0TRIO", "hello group")
        await h.bot.drain()
        [answer] = h.slack.bot_messages(channel="G0TRIO")
        assert (answer.thread_ts, answer.text) == (asked.ts, "I have heard: hello group")
        await h.slack.post_user_message(BOB, "G0TRIO", "and me", thread_ts=asked.ts, mention=False)
        await h.slack.post_user_message(CAROL, "G0TRIO", "lunch?", mention=False)
        await h.bot.drain()
        texts = [m.text for m in h.slack.bot_messages(channel="G0TRIO")]
        assert texts == ["I have heard: hello group", "I have heard: hello group | and me"]


async def test_an_approval_in_a_group_dm(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        h.slack.add_group_dm("G0TRIO", [ALICE, BOB, CAROL])
        asked = await h.slack.post_user_message(ALICE, "G0TRIO", "deploy")
        await h.bot.drain()
        [card] = [m for m in h.slack.bot_messages(channel="G0TRIO") if m.blocks]
        assert await h.click(ALICE, card.ts, ACTION_APPROVE) == 200
        assert agents.DEPLOYS == []
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts)[-1].startswith("Tool said:")
        agents.DEPLOYS.clear()


@pytest.mark.usefixtures("nothing_leaks")
async def test_message_changed_does_not_start_a_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        message = await h.mention(ALICE, "hello")
        assert model_calls(agents.memory_agent) == before + 1
        edited = {
            "type": "message",
            "subtype": "message_changed",
            "channel": CHANNEL,
            "channel_type": "channel",
            "ts": h.slack.new_ts(),
            "hidden": True,
            "message": {
                "type": "message",
                "user": ALICE,
                "text": f"<@{h.slack.bot_user_id}> hello again",
                "ts": message.ts,
            },
            "previous_message": {"type": "message", "user": ALICE, "text": message.text},
        }
        await h.slack.send_event(edited)
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before + 1
        assert len(h.texts(message.ts)) == 1


@pytest.mark.usefixtures("nothing_leaks")
async def test_mention_and_message_events_for_one_message_start_one_run(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        message = await h.slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
        events = h.slack.events_for(message)
        assert {e["type"] for e in events} == {"app_mention", "message"}
        # Slack sends them as separate deliveries, possibly at the same time.
        await asyncio.gather(*(h.slack.send_event(e) for e in events))
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before + 1
        assert h.texts(message.ts) == ["I have heard: hi"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_a_labelled_mention_also_starts_one_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, "hello")
        before = model_calls(agents.memory_agent)
        text = f"<@{h.slack.bot_user_id}|handback> hi"
        message = await h.slack.post_user_message(
            BOB, CHANNEL, text, thread_ts=asked.ts, mention=False, deliver=False
        )
        events = h.slack.events_for(message)
        assert [e["type"] for e in events] == ["message"]
        events.insert(0, {**events[0], "type": "app_mention"})
        events[0].pop("channel_type")
        for event in events:
            await h.slack.send_event(event)
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before + 1
        assert h.texts(asked.ts) == ["I have heard: hello", "I have heard: hello | hi"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_another_bots_dm_is_ignored(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        dm = h.slack.dm_channel(ALICE)
        for extra in ({"bot_id": "B0OTHER"}, {"subtype": "bot_message", "bot_id": "B0OTHER"}):
            event = {
                "type": "message",
                "channel": dm,
                "channel_type": "im",
                "user": "U0OTHERBOT",
                "text": "deploy everything",
                "ts": h.slack.new_ts(),
                **extra,
            }
            await h.slack.send_event(event)
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before
        assert h.slack.bot_messages() == []


@pytest.mark.usefixtures("nothing_leaks")
async def test_events_without_user_or_text(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = model_calls(agents.memory_agent)
        message = await h.slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
        [mention, _] = h.slack.events_for(message)
        del mention["user"]
        await h.slack.send_event(mention)
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before
        assert h.bot_replies(message.ts) == []

        message = await h.slack.post_user_message(BOB, CHANNEL, "", deliver=False)
        [mention, _] = h.slack.events_for(message)
        del mention["text"]
        await h.slack.send_event(mention)
        await h.bot.drain()
        assert model_calls(agents.memory_agent) == before + 1
        assert h.texts(message.ts) == ["I have heard: Hello!"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_huge_text_is_cut_not_rejected(make_bot: BotFactory) -> None:
    echo = Agent(name="echo", model=FunctionModel(lambda m: str(m[-1]["content"]) * 2), tools=[])
    async with make_bot(echo) as h:
        asked = await h.mention(ALICE, "x" * 40_000)
        [reply] = h.texts(asked.ts)
        assert 1000 < len(reply) <= 40_000
        assert reply.endswith("…")


@pytest.mark.usefixtures("nothing_leaks")
async def test_follow_ups_while_a_run_is_running_keep_their_order(make_bot: BotFactory) -> None:
    release = asyncio.Event()
    first_started = asyncio.Event()

    async def slow_memory(messages: list[dict[str, Any]]) -> str:
        users = [str(m["content"]) for m in messages if m["role"] == "user"]
        if users == ["one"]:
            first_started.set()
            await release.wait()
        return "heard " + ",".join(users)

    agent = Agent(name="slow-memory", model=FunctionModel(slow_memory), tools=[])
    async with make_bot(agent) as h:
        first = await h.slack.post_user_message(ALICE, CHANNEL, "one")
        await asyncio.wait_for(first_started.wait(), 5)
        await h.slack.post_user_message(BOB, CHANNEL, "two", thread_ts=first.ts, mention=False)
        await h.slack.post_user_message(CAROL, CHANNEL, "three", thread_ts=first.ts)
        release.set()
        await h.bot.drain()
        assert h.texts(first.ts) == ["heard one", "heard one,two", "heard one,two,three"]
