"""Two real `handback run` processes on one store behind one LocalSlack: work happens once.

Slack may deliver an event again, or a click, to whichever process a load balancer picks; the
store's atomic claims, not any one process, make each thing happen exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter

import pytest

from blocks import ACTION_APPROVE
from state import open_store

from .._local_slack import Ephemeral, Message, TestSlack
from .conftest import ALICE, BOB, CAROL, CHANNEL, DAVE, Harness, calls_to
from .processes import BotProcess, bot_processes

pytestmark = pytest.mark.slow

AGENT = "tests.slack.agents:recall_agent"


async def _first_to_log(bots: list[BotProcess], text: str) -> int:
    """The index of the first bot to log `text`."""
    waits = [asyncio.create_task(bot.wait_for_log(text)) for bot in bots]
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        first = done.pop()
        first.result()
        return waits.index(first)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


def _replies(slack: TestSlack, thread_ts: str) -> list[Message]:
    return slack.bot_messages(thread_ts=thread_ts)


def _texts(slack: TestSlack, thread_ts: str) -> list[str]:
    return [m.text for m in _replies(slack, thread_ts) if not m.blocks]


async def test_two_processes_share_the_work_exactly_once(store_url: str) -> None:
    async with TestSlack() as slack, bot_processes(slack, store_url, count=2, ref=AGENT) as bots:
        # (a) The same event, same event_id, reaches both processes at once: one run, one card.
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod", deliver=False)
        event_id = f"Ev{uuid.uuid4().hex[:12].upper()}"
        mention, plain = slack.events_for(asked)
        delivered = await slack.send_event(mention, event_id=event_id, to="all")
        await slack.send_event(plain, to="all")  # the same message as `message`: not a prompt
        assert [(r.url, r.status) for r in delivered.each] == [(b.url, 200) for b in bots]

        skipped_by = await _first_to_log(bots, f"ignoring a repeated delivery of {event_id}")
        started_by = 1 - skipped_by
        card = await slack.wait_for(lambda: next(iter(_replies(slack, asked.ts)), None))
        assert card is not None
        await asyncio.gather(*(bot.wait_idle() for bot in bots))
        assert [m.ts for m in _replies(slack, asked.ts)] == [card.ts]
        interaction_id = Harness.interaction_id(card)  # before the update replaces the blocks
        assert not any(
            f"repeated delivery of {event_id}" in line for line in bots[started_by].lines
        )

        # (b) 30 clicks at once, half to each process: one answer, one update, one resume.
        clickers = [BOB, CAROL, DAVE] * 10
        responses = await asyncio.gather(
            *(
                slack.click(user, card.ts, ACTION_APPROVE, to=n % 2)
                for n, user in enumerate(clickers)
            )
        )
        assert [r.status for r in responses] == [200] * 30
        assert Counter(r.url for r in responses) == {bots[0].url: 15, bots[1].url: 15}

        await slack.wait_for(lambda: len(_already_answered(slack)) == 29, timeout=20)
        await slack.wait_for(lambda: _texts(slack, asked.ts), timeout=20)
        await asyncio.gather(*(bot.wait_idle() for bot in bots))

        assert _texts(slack, asked.ts) == ["Tool said: deployed api to prod"]
        async with open_store(store_url) as store:
            stored = await store.get_interaction(interaction_id)
            assert stored is not None and stored.status == "answered"
            winner = stored.answered_by
            assert winner in clickers
            audit = Counter(entry.action for entry in await store.recent_audit(limit=100))
            assert (audit["answered"], audit["refused"]) == (1, 29)
            run = await store.load_run(stored.run_id)
            assert run is not None and run.resumed_by is not None
            child = await store.load_run(run.resumed_by)
            assert child is not None and child.status == "success"
        updates = [c for c in calls_to(slack, "chat.update") if c.args.get("ts") == card.ts]
        assert len(updates) == 1
        approved = slack.message(CHANNEL, card.ts)
        assert approved is not None and f"*Approved* by <@{winner}>" in str(approved.blocks)
        assert ACTION_APPROVE not in str(approved.blocks)
        # Each resume marks the card with a working reaction while the agent runs.
        marks = [c for c in calls_to(slack, "reactions.add") if c.args.get("timestamp") == card.ts]
        assert len(marks) == 1
        told = _already_answered(slack)
        assert len(told) == 29 and all(f"already answered by <@{winner}>" in e.text for e in told)

        # (c) A follow-up in the thread, to the process that did not start the run, remembers.
        await slack.post_user_message(
            ALICE,
            CHANNEL,
            "what did I ask for?",
            thread_ts=asked.ts,
            mention=False,
            to=skipped_by,
        )
        heard = "I have heard: deploy api to prod | what did I ask for?"
        await slack.wait_for(lambda: heard in _texts(slack, asked.ts), timeout=20)
        # And back to the first process, which must read the turn the other one added.
        await slack.post_user_message(
            ALICE, CHANNEL, "and then?", thread_ts=asked.ts, mention=False, to=started_by
        )
        await slack.wait_for(lambda: len(_texts(slack, asked.ts)) == 3, timeout=20)
        await asyncio.gather(*(bot.wait_idle() for bot in bots))
        assert _texts(slack, asked.ts) == [
            "Tool said: deployed api to prod",
            heard,
            heard + " | and then?",
        ]


async def _wait_for_replies(slack: TestSlack, thread_ts: str, count: int) -> None:
    await slack.wait_for(lambda: len(_texts(slack, thread_ts)) == count, timeout=20)


def _already_answered(slack: TestSlack) -> list[Ephemeral]:
    return [e for e in slack.ephemerals if "already answered" in e.text]


async def test_a_threads_messages_at_two_processes_at_once_take_turns(store_url: str) -> None:
    """Each turn continues from the run the previous one left, whichever process runs it: the
    store's thread lease makes the second wait, so no message is forgotten (without it both read
    the same last run, and one reply, and the thread, lose the other's message)."""
    async with TestSlack() as slack, bot_processes(slack, store_url, count=2, ref=AGENT) as bots:
        asked = await slack.post_user_message(ALICE, CHANNEL, "hello", to=0)
        await slack.wait_for(lambda: _texts(slack, asked.ts), timeout=20)
        await asyncio.gather(*(bot.wait_idle() for bot in bots))
        said = ["hello"]
        for round_ in range(3):
            pair = [f"round {round_} to bot {n}" for n in (0, 1)]
            await asyncio.gather(
                *(
                    slack.post_user_message(
                        ALICE, CHANNEL, text, thread_ts=asked.ts, mention=False, to=n
                    )
                    for n, text in enumerate(pair)
                )
            )
            said += pair
            await _wait_for_replies(slack, asked.ts, len(said) - 1)
            await asyncio.gather(*(bot.wait_idle() for bot in bots))

        heard = [
            text.removeprefix("I have heard: ").split(" | ") for text in _texts(slack, asked.ts)
        ]
        # Every reply is the previous one plus exactly one new message.
        for before, after in itertools.pairwise(heard):
            assert after[:-1] == before, heard
        assert sorted(heard[-1]) == sorted(said), heard
