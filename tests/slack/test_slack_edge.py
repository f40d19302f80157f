"""Edge cases and attacks on the Slack app: odd payloads, failing Slack calls, races, policies.

Every test goes through the bot's real HTTP endpoint and LocalSlack, and ends by checking that
nothing a person can see in Slack carries a traceback or an exception's class path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY, ACTION_DENY_REASON
from bot import Agent, Tool
from bot.playground._slack import LocalSlack
from bot.slack import ConfigError, SlackBot, load_settings
from bot.testing import FunctionModel
from bot.tools import confirm
from state import open_store

from ..conftest import answer_only
from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, DAVE, BotFactory, Harness, calls_to
from .processes import HANDBACK, ROOT, bot_processes, free_port

EVE = "U0EVE"

_LEAKS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]+\", line \d+"
    r"|<class '"
    r"|\b[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+\.[A-Z]\w*(Error|Exception)\b"
    r"|\b[A-Z]\w*(Error|Exception)(: |\()"
)


def visible_text(slack: LocalSlack) -> list[str]:
    """Everything people can read: messages (text and blocks), ephemerals and opened modals."""
    shown = [m.text + json.dumps(m.blocks) for m in slack.messages]
    shown += [e.text for e in slack.ephemerals]
    shown += [json.dumps(v.view) for v in slack.views.values()]
    return shown


def assert_no_leaks(slack: LocalSlack) -> None:
    leaks = [text for text in visible_text(slack) if _LEAKS.search(text)]
    assert leaks == [], f"Slack shows internals: {leaks}"


@pytest.fixture(autouse=True)
def _nothing_leaks(slack: LocalSlack) -> Iterator[None]:
    yield
    assert_no_leaks(slack)


def test_the_leak_check_can_fail() -> None:
    assert _LEAKS.search('Traceback (most recent call last):\n  File "x.py", line 3')
    assert _LEAKS.search("slack_sdk.errors.SlackApiError")
    assert _LEAKS.search("RuntimeError: boom")
    assert _LEAKS.search("KeyError('user')")
    assert not _LEAKS.search("This was already answered by <@U0BOB>.")
    assert not _LEAKS.search("Sorry, something went wrong on my side.")


def _model_calls(agent: Agent) -> int:
    model = agent.model
    assert isinstance(model, FunctionModel)
    return model.calls


# ------------------------------------------------------------------- odd payloads


async def test_click_without_a_user_changes_nothing(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        del payload["user"]
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status in {200, 400}
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        assert h.texts(asked.ts) == []


async def test_several_actions_in_one_payload_resume_once(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        deny = h.slack.block_actions_payload(BOB, card.ts, ACTION_DENY)["actions"][0]
        payload["actions"].append(deny)
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]
        updates = [c for c in calls_to(h.slack, "chat.update") if c.args.get("ts") == card.ts]
        assert len(updates) == 1


async def test_a_click_in_another_channel_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        payload["channel"] = {"id": "C0DEPLOYS", "name": "deploys"}
        payload["container"]["channel_id"] = "C0DEPLOYS"
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert "does not belong" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []


async def test_message_changed_does_not_start_a_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = _model_calls(agents.memory_agent)
        message = await h.mention(ALICE, "hello")
        assert _model_calls(agents.memory_agent) == before + 1
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
        assert _model_calls(agents.memory_agent) == before + 1
        assert len(h.texts(message.ts)) == 1


async def test_mention_and_message_events_for_one_message_start_one_run(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = _model_calls(agents.memory_agent)
        message = await h.slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
        events = h.slack.events_for(message)
        assert {e["type"] for e in events} == {"app_mention", "message"}
        # Slack sends them as separate deliveries, possibly at the same time.
        await asyncio.gather(*(h.slack.send_event(e) for e in events))
        await h.bot.drain()
        assert _model_calls(agents.memory_agent) == before + 1
        assert h.texts(message.ts) == ["I have heard: hi"]


async def test_a_labelled_mention_also_starts_one_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, "hello")
        before = _model_calls(agents.memory_agent)
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
        assert _model_calls(agents.memory_agent) == before + 1
        assert h.texts(asked.ts) == ["I have heard: hello", "I have heard: hello | hi"]


async def test_another_bots_dm_is_ignored(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = _model_calls(agents.memory_agent)
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
        assert _model_calls(agents.memory_agent) == before
        assert h.slack.bot_messages() == []


async def test_events_without_user_or_text(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        before = _model_calls(agents.memory_agent)
        message = await h.slack.post_user_message(ALICE, CHANNEL, "hi", deliver=False)
        [mention, _] = h.slack.events_for(message)
        del mention["user"]
        await h.slack.send_event(mention)
        await h.bot.drain()
        assert _model_calls(agents.memory_agent) == before
        assert h.bot_replies(message.ts) == []

        message = await h.slack.post_user_message(BOB, CHANNEL, "", deliver=False)
        [mention, _] = h.slack.events_for(message)
        del mention["text"]
        await h.slack.send_event(mention)
        await h.bot.drain()
        assert _model_calls(agents.memory_agent) == before + 1
        assert h.texts(message.ts) == ["I have heard: Hello!"]


async def test_huge_text_is_cut_not_rejected(make_bot: BotFactory) -> None:
    echo = Agent(name="echo", model=FunctionModel(lambda m: str(m[-1]["content"]) * 2), tools=[])
    async with make_bot(echo) as h:
        asked = await h.mention(ALICE, "x" * 40_000)
        [reply] = h.texts(asked.ts)
        assert 1000 < len(reply) <= 40_000
        assert reply.endswith("…")


async def test_model_echoing_channel_pings_cannot_ping(make_bot: BotFactory) -> None:
    echo = Agent(
        name="echo",
        model=FunctionModel(lambda m: "<!channel> <!here> <@U0BOB> <https://evil|click> & done"),
        tools=[],
    )
    async with make_bot(echo) as h:
        asked = await h.mention(ALICE, "say it")
        [reply] = h.texts(asked.ts)
        assert "<!channel>" not in reply and "<!here>" not in reply
        assert "<https://evil" not in reply and "<@U0BOB>" not in reply
        assert "&lt;!channel&gt;" in reply


async def test_answers_cannot_ping_through_the_card_or_the_reply(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent) as h:
        asked = await h.mention(ALICE, "release")
        card = h.card(asked.ts)
        await h.reply(BOB, asked.ts, "<!channel> <https://evil|v2> & co")
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = [updated.text, json.dumps(updated.blocks), *h.texts(asked.ts)]
        assert all("<!channel>" not in text and "<https://evil" not in text for text in shown)
        assert "&lt;!channel&gt;" in h.texts(asked.ts)[-1]


async def test_a_deny_reason_cannot_ping(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_DENY_REASON)
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        await h.slack.submit_view(BOB, view.id, {field: "<!here> <@U0ALICE> is wrong"})
        await h.bot.drain()
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = [updated.text, json.dumps(updated.blocks), *h.texts(asked.ts)]
        assert all("<!here>" not in text and "<@U0ALICE> is" not in text for text in shown)
        assert "Denied" in h.texts(asked.ts)[-1]


# ------------------------------------------------------------------------- policy


async def test_thread_reply_by_a_non_answerer_does_not_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "release")
        card = h.card(asked.ts)
        calls = _model_calls(agents.free_text_agent)
        await h.reply(CAROL, asked.ts, "carol-release")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert "may answer" in h.ephemerals(CAROL)[-1]
        assert _model_calls(agents.free_text_agent) == calls  # no new run either
        await h.reply(BOB, asked.ts, "bob-release")
        assert h.texts(asked.ts) == ["Tool said: bob-release"]


async def test_requester_may_deny_but_not_approve_their_own_request(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "someone else" in h.ephemerals(ALICE)[-1]
        await h.click(ALICE, card.ts, ACTION_DENY)
        assert agents.DEPLOYS == []
        assert "Denied" in h.texts(asked.ts)[-1]
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.answered_by == ALICE


async def test_non_approver_may_not_deny(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(DAVE, card.ts, ACTION_DENY)
        await h.click(DAVE, card.ts, ACTION_DENY_REASON)
        assert all("may approve" in text for text in h.ephemerals(DAVE))
        assert len(h.ephemerals(DAVE)) == 2
        assert h.slack.views == {}
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"


async def test_a_non_approver_cannot_close_an_approval_by_talking(make_bot: BotFactory) -> None:
    async with make_bot(agents.recall_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy api")
        card = h.card(asked.ts)
        calls = _model_calls(agents.recall_agent)
        await h.reply(DAVE, asked.ts, "forget it")  # would supersede the approval
        assert "may approve" in h.ephemerals(DAVE)[-1]
        assert _model_calls(agents.recall_agent) == calls
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [DAVE]
        # An approver, or the requester, may move the conversation on.
        await h.reply(BOB, asked.ts, "what did alice ask?")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "superseded"
        assert h.texts(asked.ts)[-1].endswith("| what did alice ask?")


async def test_the_requester_may_withdraw_a_question_they_may_not_answer(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.confirm_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        await h.reply(ALICE, asked.ts, "never mind")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "superseded"
        assert h.ephemerals(ALICE) == []


async def test_self_approval_allowed_by_setting(make_bot: BotFactory) -> None:
    async with make_bot(
        agents.approval_agent, HANDBACK_APPROVERS="U0ALICE", HANDBACK_ALLOW_SELF_APPROVAL="1"
    ) as h:
        asked = await h.mention(ALICE, "deploy")
        await h.click(ALICE, h.card(asked.ts).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_self_approval_flag_never_bypasses_the_approver_list(make_bot: BotFactory) -> None:
    # The flag relaxes "not the requester" only: Alice asked, is not on the list, and the flag is
    # on; her approve is refused and audited, nothing runs, and a listed approver still can.
    async with make_bot(
        agents.approval_agent, HANDBACK_APPROVERS="U0BOB", HANDBACK_ALLOW_SELF_APPROVAL="true"
    ) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "may approve `deploy`" in h.ephemerals(ALICE)[-1]
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [ALICE]
        h.slack.add_user("U0BOB", "bob")
        await h.click("U0BOB", card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_empty_approver_list_means_anyone_but_the_requester(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "someone else" in h.ephemerals(ALICE)[-1]
        h.slack.add_user(EVE, "eve")
        await h.click(EVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


@pytest.mark.parametrize("failure", ["server_error", "unknown_group"])
async def test_user_group_lookup_failure_fails_closed(make_bot: BotFactory, failure: str) -> None:
    group = "S0OPS" if failure == "server_error" else "S0GONE"
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=group) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        if failure == "server_error":
            for _ in range(3):  # more than the client's retries
                h.slack.fail_next("usergroups.users.list", status=500)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        [told] = h.ephemerals(BOB)
        assert group in told and "could not" in told.lower()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [BOB]
        if failure == "server_error":
            await h.click(BOB, card.ts, ACTION_APPROVE)  # Slack is back: the click works
            assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_modal_submitted_by_someone_who_may_not_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.typed_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "scale")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:answer")
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        payload = h.slack.view_submission_payload(BOB, view.id, {field: "3"})
        payload["user"] = {"id": CAROL, "username": "carol", "name": "carol", "team_id": "T0LOCAL"}
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.json()["response_action"] == "errors"
        assert "may answer" in json.dumps(response.json()["errors"])
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"


async def test_modal_naming_an_unknown_interaction(make_bot: BotFactory) -> None:
    async with make_bot(agents.typed_agent) as h:
        asked = await h.mention(ALICE, "scale")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:answer")
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        payload = h.slack.view_submission_payload(BOB, view.id, {field: "3"})
        payload["view"]["private_metadata"] = "forged-interaction"
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status == 200
        assert "no such request" in json.dumps(response.json())
        assert h.texts(asked.ts) == []


# --------------------------------------------------------------- Slack failing


async def test_card_post_failing_once_is_retried(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        h.slack.fail_next("chat.postMessage", status=500)
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]


async def test_card_post_failing_tells_the_thread_and_keeps_the_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.recall_agent) as h:
        for _ in range(2):  # the post and its retry
            h.slack.fail_next("chat.postMessage", status=500)
        asked = await h.mention(ALICE, "deploy api")
        assert h.cards(asked.ts) == []
        [notice] = h.texts(asked.ts)
        assert "could not show" in notice.lower()
        records = await h.store.due_interactions(h.clock() + 10**9)
        [record] = [r for r in records if r.thread_ts == asked.ts]
        assert record.status == "pending" and record.message_ts is None
        # The conversation goes on: the next message in the thread moves past the lost card.
        await h.reply(BOB, asked.ts, "deploy again")
        assert len(h.cards(asked.ts)) == 1
        closed = await h.store.get_interaction(record.interaction_id)
        assert closed is not None and closed.status == "superseded"


async def test_card_update_failing_after_the_claim_still_resumes(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        for _ in range(2):
            h.slack.fail_next("chat.update", status=500)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]


async def test_paging_while_someone_answers_leaves_the_answered_card(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.huge_select_agent) as h:
        asked = await h.mention(ALICE, "pick a host")
        card = h.card(asked.ts)
        # Bob's page update fails once, so it lands (on the retry) after Carol's answer.
        h.slack.fail_next("chat.update", status=500)
        await h.slack.click(BOB, card.ts, "hb:more:1")
        await h.slack.wait_for(lambda: [c for c in h.slack.calls if c.method == "chat.update"])
        await h.slack.click(CAROL, card.ts, "hb:select", selected="host-003")
        await h.bot.drain()
        assert h.texts(asked.ts) == ["Tool said: host-003"]
        final = h.slack.message(card.channel, card.ts)
        assert final is not None
        shown = json.dumps(final.blocks)
        assert f"<@{CAROL}>" in shown
        assert "hb:select" not in shown and "hb:more" not in shown


async def test_an_answer_the_run_refuses_ends_the_run_once(make_bot: BotFactory) -> None:
    """A stored answer the runtime will not take (here: written behind the bot's back, as a
    schema change between pause and resume would leave it) ends the run instead of leaving it
    paused and complained about on every restart."""
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        claim = await answer_only(
            h.store, h.interaction_id(card), answer="perhaps", answered_by=BOB, now=h.clock()
        )
        assert claim.won and claim.record is not None
        run_id = claim.record.run_id
    for _ in range(2):  # two restarts: the second finds nothing left to do
        async with make_bot(agents.confirm_agent) as restarted:
            await restarted.bot.drain()
    [reply] = h.texts(asked.ts)
    assert reply.startswith("Stopped")
    run = await _load_run(h, run_id)
    assert run is not None and run.resumed_by is not None


async def _load_run(h: Harness, run_id: str) -> Any:
    async with open_store(h.bot.settings.handback_store) as store:
        return await store.load_run(run_id)


async def test_a_store_outage_is_told_not_swallowed(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.store.aclose()  # what a Redis restart looks like to the bot, for a moment
        # A click that cannot be recorded is acked (Slack shows no error) and the person is told
        # that nothing happened.
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert "could not record that" in h.ephemerals(BOB)[-1]
        # An event that cannot be recorded is not acked, so Slack delivers it again later.
        message = await h.slack.post_user_message(
            BOB, CHANNEL, "hello?", thread_ts=asked.ts, mention=False, deliver=False
        )
        [event] = h.slack.events_for(message)
        assert (await h.slack.send_event(event)).status == 503
        await h.bot.drain()
        assert h.texts(asked.ts) == []
        assert agents.DEPLOYS == []


def _fail_on_resume(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if messages[-1]["role"] == "tool":
        raise RuntimeError("model server fell over at /srv/secret")
    return [{"name": "confirm", "arguments": {"action": "Restart api?"}}]


async def test_model_raising_mid_resume_is_a_friendly_message(make_bot: BotFactory) -> None:
    agent = Agent(name="fails-late", model=FunctionModel(_fail_on_resume), tools=[confirm])
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart")
        await h.click(BOB, h.card(asked.ts).ts, "hb:confirm")
        [reply] = h.texts(asked.ts)
        assert "went wrong" in reply or "did not work" in reply
        assert "/srv/secret" not in reply and "RuntimeError" not in reply


async def test_tool_raising_mid_resume_is_a_friendly_message(make_bot: BotFactory) -> None:
    def explode(service: str) -> str:
        """Restart a service."""
        raise OSError(f"/etc/secret/{service} is not writable")

    agent = Agent(
        name="explode",
        model=FunctionModel(
            lambda m: (
                ("the restart failed" if "failed" in str(m[-1]["content"]) else "ok")
                if m[-1]["role"] == "tool"
                else [{"name": "explode", "arguments": {"service": "api"}}]
            )
        ),
        tools=[Tool(explode, requires_approval=True)],
    )
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart")
        await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)
        # The model hears that the tool failed (its words are its own); the thread gets them.
        assert h.texts(asked.ts) == ["the restart failed"]


# -------------------------------------------------------------------------- races


async def test_expiry_racing_a_click_exactly_one_wins(make_bot: BotFactory) -> None:
    for _ in range(5):
        async with make_bot(agents.approval_agent) as h:
            asked = await h.mention(ALICE, "deploy")
            card = h.card(asked.ts)
            record = await h.store.get_interaction(h.interaction_id(card))
            assert record is not None
            await asyncio.gather(
                h.slack.click(BOB, card.ts, ACTION_APPROVE), h.bot.sweeper.expire(record)
            )
            await h.bot.drain()
            stored = await h.store.get_interaction(record.interaction_id)
            assert stored is not None and stored.status in {"answered", "expired"}
            [final] = h.texts(asked.ts)
            if stored.status == "answered":
                assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
                assert final == "Tool said: deployed api to prod"
            else:
                assert agents.DEPLOYS == [] and final.startswith("Stopped")
                assert "expired" in h.ephemerals(BOB)[-1]
            audit = await h.store.recent_audit(limit=1000)
            actions = [e.action for e in audit if e.interaction_id == record.interaction_id]
            assert sorted(a for a in actions if a in {"answered", "expired"}) in (
                ["answered"],
                ["expired"],
            )
            agents.DEPLOYS.clear()
        h.slack.messages.clear()
        h.slack.ephemerals.clear()


@asynccontextmanager
async def _second_bot(h: Harness, store_url: str, agent: Agent) -> AsyncIterator[SlackBot]:
    config = load_settings(
        slack_bot_token=h.slack.bot_token,
        slack_signing_secret=h.slack.signing_secret,
        slack_api_url=h.slack.api_url,
        handback_store=store_url,
    )
    async with (
        open_store(store_url) as store,
        SlackBot(
            agent=agents.twin(agent), store=store, settings=config, clock=h.clock, loops=False
        ) as bot,
    ):
        yield bot


async def test_sweeper_in_one_process_and_click_in_another(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="60") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        async with _second_bot(h, store_url, agents.approval_agent) as other:
            h.clock.advance(61)
            await asyncio.gather(
                h.slack.click(BOB, card.ts, ACTION_APPROVE), other.sweeper.run_until_idle()
            )
            await asyncio.gather(h.bot.drain(), other.drain())
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "expired"
        assert agents.DEPLOYS == []
        [final] = h.texts(asked.ts)
        assert final.startswith("Stopped")
        assert sum(e.action == "expired" for e in await h.store.recent_audit()) == 1


async def test_interaction_ttl_of_one_second(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="1") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)  # in time
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        second = await h.mention(ALICE, "deploy")
        late = h.card(second.ts)
        h.clock.advance(1.0)  # exactly at the deadline: expired
        await h.click(BOB, late.ts, ACTION_APPROVE)
        assert "expired" in h.ephemerals(BOB)[-1]
        assert len(agents.DEPLOYS) == 1
        assert h.texts(second.ts)[-1].startswith("Stopped")


@pytest.mark.parametrize("ttl", ["99999999d", "1e308"])
async def test_an_absurd_interaction_ttl_is_a_config_error(ttl: str) -> None:
    with pytest.raises(ConfigError, match="HANDBACK_INTERACTION_TTL"):
        load_settings(
            slack_bot_token="xoxb-x", slack_signing_secret="s", handback_interaction_ttl=ttl
        )


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


# ------------------------------------------------------------------ a real process


async def _slow_deploy(service: str, environment: str) -> str:
    """Deploy a service, slowly."""
    logging.getLogger("handback.slack").warning("deploying %s now", service)
    await asyncio.sleep(1.0)
    return f"deployed {service} to {environment}"


slow_approval_agent = Agent(
    name="slow-approver",
    model=FunctionModel(
        lambda m: (
            f"Tool said: {m[-1]['content']}"
            if m[-1]["role"] == "tool"
            else [{"name": "_slow_deploy", "arguments": {"service": "api", "environment": "prod"}}]
        )
    ),
    tools=[Tool(_slow_deploy, requires_approval=True)],
)
"""Served by a real `handback run` in the SIGTERM test."""


@pytest.mark.slow
async def test_sigterm_while_a_resume_is_in_flight_finishes_it(sqlite_store_url: str) -> None:
    async with (
        LocalSlack() as slack,
        bot_processes(
            slack, sqlite_store_url, ref="tests.slack.test_slack_edge:slow_approval_agent"
        ) as [bot],
    ):
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy")
        [card] = await slack.wait_for(lambda: slack.bot_messages())
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        await bot.wait_for_log("deploying api now")
        bot.process.send_signal(signal.SIGTERM)
        assert await bot.stop() == 0
        texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
        assert texts == ["Tool said: deployed api to prod"]
        assert_no_leaks(slack)


async def _handback_run(env: dict[str, str]) -> asyncio.subprocess.Process:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return await asyncio.create_subprocess_exec(
        str(HANDBACK),
        "run",
        "tests.slack.agents:approval_agent",
        cwd=ROOT,
        env={**keep, "HANDBACK_LOG_LEVEL": "INFO", **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_token_slack_refuses_stops_start_up_with_one_line(
    sqlite_store_url: str, mode: str
) -> None:
    async with LocalSlack() as slack:
        env = {
            "SLACK_BOT_TOKEN": "xoxb-wrong" if mode == "http" else slack.bot_token,
            "SLACK_API_URL": slack.api_url,
            "HANDBACK_STORE": sqlite_store_url,
            "HANDBACK_APPROVERS": "anyone",
            "HOST": "127.0.0.1",
            "PORT": str(free_port()),
        }
        if mode == "http":
            env["SLACK_SIGNING_SECRET"] = slack.signing_secret
        else:
            env["SLACK_APP_TOKEN"] = "xapp-wrong"
        process = await _handback_run(env)
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
    name = "SLACK_BOT_TOKEN" if mode == "http" else "SLACK_APP_TOKEN"
    assert process.returncode == 2
    assert (
        stderr.decode().splitlines()[-1] == f"handback: {name} was refused by Slack (invalid_auth)"
    )
    assert "Traceback" not in stderr.decode()


@pytest.mark.slow
async def test_sigterm_while_socket_mode_cannot_connect(sqlite_store_url: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/api/"
    process = await _handback_run(
        {
            "SLACK_BOT_TOKEN": "xoxb-x",
            "SLACK_APP_TOKEN": "xapp-x",
            "SLACK_API_URL": dead,
            "HANDBACK_STORE": sqlite_store_url,
            "HANDBACK_APPROVERS": "anyone",
        }
    )
    assert process.stderr is not None
    async with asyncio.timeout(30):
        while b"connecting over Socket Mode" not in (line := await process.stderr.readline()):
            assert line, "the bot exited before connecting"
    process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(10):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
