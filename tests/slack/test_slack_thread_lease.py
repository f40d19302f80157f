"""A thread's turns take the store's thread lease, as another process's turns would: a turn waits
while the lease is held elsewhere, keeps it while it runs, and frees it when it ends."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bot import Agent
from bot.testing import FunctionModel

from . import agents
from .conftest import ALICE, CHANNEL, BotFactory, Harness, calls_to


def _working_on(h: Harness, ts: str) -> bool:
    return any(c.args.get("timestamp") == ts for c in calls_to(h.slack, "reactions.add"))


async def test_a_turn_waits_while_another_process_holds_the_thread(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        first = await h.mention(ALICE, "hello")
        assert h.texts(first.ts) == ["I have heard: hello"]
        # What another process running a turn of this thread holds.
        assert await h.store.acquire_thread(CHANNEL, first.ts, owner="elsewhere", ttl=60)
        again = await h.slack.post_user_message(
            ALICE, CHANNEL, "again", thread_ts=first.ts, mention=False
        )
        await h.slack.wait_for(lambda: _working_on(h, again.ts))
        await asyncio.sleep(0.3)  # several retries: the turn must not have run meanwhile
        assert h.texts(first.ts) == ["I have heard: hello"]

        await h.store.release_thread(CHANNEL, first.ts, owner="elsewhere")
        await h.bot.drain()
        assert h.texts(first.ts) == ["I have heard: hello", "I have heard: hello | again"]
        # The turn gave its lease back.
        assert await h.store.acquire_thread(CHANNEL, first.ts, owner="next", ttl=60)


async def test_a_lease_left_by_a_dead_process_delays_the_thread_only_until_it_ends(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.memory_agent) as h:
        first = await h.mention(ALICE, "hello")
        assert await h.store.acquire_thread(CHANNEL, first.ts, owner="crashed", ttl=0.4)
        started = time.monotonic()
        await h.reply(ALICE, first.ts, "still there?")
        waited = time.monotonic() - started
        assert h.texts(first.ts)[-1] == "I have heard: hello | still there?"
        # Released no earlier than the lease ended, and at most one backoff step (0.2 s) later.
        assert 0.35 <= waited < 2.0, waited


async def test_a_long_turn_keeps_its_lease_past_the_ttl(make_bot: BotFactory) -> None:
    entered, finish = asyncio.Event(), asyncio.Event()

    async def slow(messages: list[dict[str, Any]]) -> str:
        entered.set()
        await finish.wait()
        return "done"

    agent = Agent(name="slow", model=FunctionModel(slow), tools=[])
    # Half a second: a loaded 2-core machine can starve a refresh for a tenth of one.
    async with make_bot(agent, HANDBACK_LIVENESS_TTL="0.5") as h:
        asked = await h.slack.post_user_message(ALICE, CHANNEL, "take your time")
        try:
            async with asyncio.timeout(10):
                await entered.wait()
            # Three TTLs: without the refresh the lease would have ended twice over.
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                assert not await h.store.acquire_thread(CHANNEL, asked.ts, owner="other", ttl=60)
                await asyncio.sleep(0.05)
        finally:
            finish.set()  # a failed check must not leave the bot's turn waiting forever
        await h.bot.drain()
        assert h.texts(asked.ts) == ["done"]
        assert await h.store.acquire_thread(CHANNEL, asked.ts, owner="other", ttl=60)
