"""A store call that fails once in the middle of a turn (a pool timeout, a dropped connection)
is an outage, not a failed run: the work item is retried and the turn ends as it would have,
its tool having run once (issue 8). In process, with a store that fails on cue. A store that is
gone is told: a click is acked and its person told nothing happened, an event is not acked."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from blocks import ACTION_APPROVE
from bot.slack import SlackBot, load_settings
from state import RunRecord, StopGuard, StoreError, open_store

from .._local_slack import TestSlack

# Writes to the SQLite file behind the store's back, as another process would.
from ..state.conftest import raw_sqlite
from . import agents
from .agents import DEPLOYS, approval_agent
from .conftest import ALICE, BOB, CHANNEL, BotFactory
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

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        if not self.failed and self._fails(run):
            self.failed.append(run.run_id)
            raise StoreError("Redis at `test` failed: No connection available.")
        return await self._store.save_run(run, stop=stop, then=then)


async def test_a_failed_final_save_is_retried_not_reported_as_a_failed_run(
    store_url: str,
) -> None:
    async with TestSlack() as slack, open_store(store_url) as real:
        store = FlakyStore(real, lambda run: run.status == "success")
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=store_url,
            handback_approvers="anyone",
            handback_liveness_ttl=0.5,
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


def run_sql(url: str, sql: str) -> None:
    conn = raw_sqlite(url)
    try:
        with conn:
            conn.execute(sql)
    finally:
        conn.close()


async def test_clicks_arriving_together_each_count_or_are_told_they_did_not(
    sqlite_store_url: str,
) -> None:
    """Clicks that arrive together share inbox writes (one transaction for those that come
    while one is being written): when one of them cannot be written, neither can those it
    shares a write with, and each of those clickers is told; the others' clicks count. None is
    both told and counted, and clicked again, each card deploys once."""
    async with TestSlack() as slack, open_store(sqlite_store_url) as store:
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=sqlite_store_url,
            handback_approvers="anyone",
        )
        bot = SlackBot(agent=approval_agent, store=store, settings=settings, loops=False)
        async with bot, bot.serve_http("127.0.0.1", 0) as url:
            slack.bot_url = url
            asked = [
                await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
                for _ in range(6)
            ]
            await bot.drain()
            cards = [await card_in(slack, message.ts, timeout=5) for message in asked]
            # The file refuses the click on the last card only; arriving last, it usually comes
            # while the first is being written, and shares its write with the others.
            run_sql(
                sqlite_store_url,
                "CREATE TRIGGER refuse BEFORE INSERT ON inbox"
                f" WHEN NEW.body LIKE '%{cards[-1].ts}%'"
                " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
            )
            clicked = await asyncio.gather(
                *(slack.click(BOB, card.ts, ACTION_APPROVE) for card in cards)
            )
            assert [response.status for response in clicked] == [200] * len(cards)
            await bot.drain()
            told = [e for e in slack.ephemerals_for(BOB) if "could not record" in e.text]
            counted = [n for n, message in enumerate(asked) if answers(slack, message.ts)]
            assert len(cards) - 1 not in counted and len(told) >= 1
            assert len(told) + len(counted) == len(cards) == len(told) + len(DEPLOYS)

            run_sql(sqlite_store_url, "DROP TRIGGER refuse")
            again = [card for n, card in enumerate(cards) if n not in counted]
            await asyncio.gather(*(slack.click(BOB, card.ts, ACTION_APPROVE) for card in again))
            await bot.drain()
            assert len(DEPLOYS) == len(cards)
            assert [answers(slack, message.ts) for message in asked] == [
                ["Tool said: deployed api to prod"]
            ] * len(cards)


@pytest.mark.usefixtures("nothing_leaks")
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
