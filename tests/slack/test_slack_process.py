"""The real `handback run` process: killed with SIGKILL after posting a card, restarted, clicked."""

from __future__ import annotations

import signal

import pytest

from blocks import ACTION_APPROVE
from bot.playground._slack import LocalSlack

from .conftest import ALICE, BOB, CHANNEL
from .processes import bot_processes

pytestmark = pytest.mark.slow


async def test_card_posted_before_sigkill_resumes_after_restart(store_url: str) -> None:
    async with LocalSlack() as slack:
        async with bot_processes(slack, store_url) as [first]:
            asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
            card = await slack.wait_for(lambda: next(iter(slack.bot_messages()), None))
            assert card is not None
            assert card.blocks and card.thread_ts == asked.ts
            first.process.send_signal(signal.SIGKILL)
            assert await first.process.wait() == -signal.SIGKILL

        async with bot_processes(slack, store_url):
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            answer = await slack.wait_for(
                lambda: [m for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks],
                timeout=20,
            )
            assert answer[0].text == "Tool said: deployed api to prod"
            updated = slack.message(card.channel, card.ts)
            assert updated is not None and f"<@{BOB}>" in str(updated.blocks)


async def test_sigterm_stops_cleanly(sqlite_store_url: str) -> None:
    async with LocalSlack() as slack, bot_processes(slack, sqlite_store_url) as [bot]:
        assert await bot.stop() == 0
