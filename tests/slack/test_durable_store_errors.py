"""A store call that fails once in the middle of a turn (a pool timeout, a dropped connection)
is an outage, not a failed run: the work item is retried and the turn ends as it would have,
its tool having run once (issue 8). In process, with a store that fails on cue."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from blocks import ACTION_APPROVE
from bot.playground._slack import LocalSlack
from bot.slack import SlackBot, load_settings
from state import RunRecord, StoreError, open_store

from .agents import DEPLOYS, approval_agent
from .conftest import ALICE, BOB, CHANNEL
from .durable import answers, card_in, sorry


class FlakyStore:
    """A store whose `save_run` raises `StoreError` once for the first record `fails(run)`
    picks; everything else goes to the real store."""

    def __init__(self, store: Any, fails: Callable[[RunRecord], bool]) -> None:
        self._store = store
        self._fails = fails
        self.failed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def save_run(self, run: RunRecord) -> None:
        if not self.failed and self._fails(run):
            self.failed.append(run.run_id)
            raise StoreError("Redis at `test` failed: No connection available.")
        await self._store.save_run(run)


async def test_a_failed_final_save_is_retried_not_reported_as_a_failed_run(
    store_url: str,
) -> None:
    async with LocalSlack() as slack, open_store(store_url) as real:
        store = FlakyStore(real, lambda run: run.status == "success")
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=store_url,
            handback_work_lease=0.2,
        )
        bot = SlackBot(agent=approval_agent, store=store, settings=settings, loops=False)  # type: ignore[arg-type]
        async with bot, bot.serve_http("127.0.0.1", 0) as url:
            slack.bot_url = url
            asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
            await bot.drain()
            card = await card_in(slack, asked.ts, timeout=5)
            await slack.click(BOB, card.ts, ACTION_APPROVE)
            # The click's item is taken again once its lease (0.2 s) is over.
            deadline = time.monotonic() + 10
            while not answers(slack, asked.ts) and time.monotonic() < deadline:
                await bot.drain()
            assert store.failed, "the final save never ran"
            assert answers(slack, asked.ts) == ["Tool said: deployed api to prod"]
            assert DEPLOYS == [{"service": "api", "environment": "prod"}]
            assert sorry(slack) == []
