"""A secret typed in a slash command leaves the store however its paused run ends: expired,
superseded by a new message, stopped or denied, no Redis key and no SQLite row holds it after
the ending (read raw); an approved one still gives the tool the real value. Over signed HTTP,
on both stores."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Literal

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY

from .._local_slack import TestSlack
from .conftest import ALICE, BOB, CHANNEL, BotFactory, Harness
from .test_security_surface import RELEASED, _raw_holders, _release_agent

SECRET = "hunter9-typed-in-slack"

Ending = Literal["expired", "superseded", "stopped", "denied", "approved"]


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with TestSlack() as local:
        local.agent_refusal = None  # the app is an agent: its sessions have a stop button
        yield local


async def _typed(h: Harness) -> str:
    """ALICE types the command with a secret; the thread its card waits in."""
    ran = await h.slack.run_command(ALICE, CHANNEL, "/deploy", f"cmd9 1.0 staging token={SECRET}")
    assert ran.status == 200
    await h.bot.drain()
    [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
    assert h.card(opening.ts)
    return opening.ts


async def _end(h: Harness, thread: str, ending: Ending) -> None:
    card = h.card(thread)
    match ending:
        case "expired":
            h.clock.advance(3601)
            assert await h.bot.sweeper.run_until_idle() >= 1
        case "superseded":
            await h.reply(ALICE, thread, "never mind, leave it")
        case "stopped":
            response = await h.slack.send_event(
                {
                    "type": "agent_session_stopped",
                    "channel": CHANNEL,
                    "thread_ts": thread,
                    "user": ALICE,
                    "streaming_message_ts": [],
                    "event_ts": h.slack.new_ts(),
                }
            )
            assert response.status == 200
        case "denied":
            assert await h.click(BOB, card.ts, ACTION_DENY) == 200
        case "approved":
            assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
    await h.bot.drain()
    # Whatever the recovery sweep does afterwards must not bring the value back either.
    h.clock.advance(5)
    await h.bot.sweeper.run_until_idle()
    await h.bot.drain()


@pytest.mark.parametrize("ending", ["expired", "superseded", "stopped", "denied", "approved"])
async def test_no_stored_byte_keeps_a_commands_secret_however_its_run_ends(
    make_bot: BotFactory, store_url: str, ending: Ending
) -> None:
    RELEASED.clear()
    async with make_bot(
        _release_agent(), HANDBACK_APPROVERS=BOB, HANDBACK_INTERACTION_TTL="1h"
    ) as h:
        thread = await _typed(h)
        interaction_id = h.interaction_id(h.card(thread))
        # While it waits, the pending call is the one place that holds it (the tool needs it).
        assert await _raw_holders(h, store_url, SECRET) != []
        await _end(h, thread, ending)
        ran = RELEASED.copy()
        assert ran == ([SECRET] if ending == "approved" else [])
        record = await h.store.get_interaction(interaction_id)
        assert record is not None and record.status != "pending", record
        assert await _raw_holders(h, store_url, SECRET) == []


async def test_an_approval_racing_a_new_message_gets_the_typed_value_or_nothing_runs(
    make_bot: BotFactory, store_url: str
) -> None:
    """The click and a new message in the thread arrive together, each sent first in turn:
    whichever claims the paused run wins. When the approval wins the tool gets what was typed
    (never the redacted form); when the message wins nothing runs; either way the value then
    leaves. (Over HTTP the click claims before its ack and the message waits for the worker, so
    the approval is expected to win; the store-level loss is in tests/runtime/test_commands.py.)"""
    outcomes: list[str] = []
    async with make_bot(_release_agent(), HANDBACK_APPROVERS=BOB) as h:
        for attempt in range(6):
            RELEASED.clear()
            h.slack.messages.clear()
            thread = await _typed(h)
            card = h.card(thread)
            click = h.slack.click(BOB, card.ts, ACTION_APPROVE)
            message = h.slack.post_user_message(
                ALICE, CHANNEL, f"stop ({attempt})", thread_ts=thread
            )
            # Each sent first in turn: neither waits for the bot to handle the other.
            if attempt % 2:
                _, clicked = await asyncio.gather(message, click)
            else:
                clicked, _ = await asyncio.gather(click, message)
            assert clicked.status == 200
            await h.bot.drain()
            h.clock.advance(5)
            await h.bot.sweeper.run_until_idle()
            await h.bot.drain()
            assert RELEASED in ([], [SECRET]), (attempt, RELEASED)
            outcomes.append("approved" if RELEASED else "superseded")
            assert await _raw_holders(h, store_url, SECRET) == [], (attempt, outcomes)
    assert "approved" in outcomes, outcomes  # the race the value must survive was run
