"""A burst on one bot process with default settings (issue 8): 1,000 mentions at once, then
1,000 approvals at once; every mention gets its card, every approval its answer, nobody a
"Sorry". `HBTEST_BURST` sets another size (the timings are printed; run with `-s`)."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot.playground._slack import LocalSlack, Message

from .conftest import ALICE, BOB, CHANNEL
from .durable import AGENT, Marks, poll, sorry
from .processes import Fleet

pytestmark = pytest.mark.slow

SIZE = int(os.environ.get("HBTEST_BURST", "1000"))
BURST_WAIT = float(os.environ.get("HBTEST_BURST_WAIT", "120"))
"""Seconds each half (cards, answers) may take before the test gives up."""
DEPLOYED = "Tool said: deployed api to prod"
DEFAULTS = {"HANDBACK_THREAD_LEASE_TTL": ""}
"""`bot_env` shortens the thread lease for crash tests; this one runs with every default."""


async def _mention(slack: LocalSlack, text: str) -> tuple[Message, list[int], bool]:
    """A person's mention, delivered as Slack does: an event answered with a non-2xx is
    delivered again (same `event_id`, up to 3 retries). The statuses of the first deliveries,
    and whether every event was taken in the end."""
    message = await slack.post_user_message(ALICE, CHANNEL, text, deliver=False)
    first = []
    taken = True
    for event in slack.events_for(message):
        event_id = slack.new_event_id()
        status = (await slack.send_event(event, event_id=event_id)).status
        first.append(status)
        for retry in range(1, 4):
            if 200 <= status < 300:
                break
            status = (await slack.send_event(event, event_id=event_id, retry_num=retry)).status
        taken = taken and 200 <= status < 300
    return message, first, taken


def _by_thread(slack: LocalSlack, *, cards: bool) -> dict[str, list[Message]]:
    threads: dict[str, list[Message]] = {}
    for message in slack.bot_messages(channel=CHANNEL):
        if bool(message.blocks) == cards and message.thread_ts:
            threads.setdefault(message.thread_ts, []).append(message)
    return threads


def _not_recorded(slack: LocalSlack) -> int:
    return sum("could not record" in e.text for e in slack.ephemerals)


async def test_a_thousand_mentions_then_a_thousand_approvals(
    store_url: str, tmp_path: Path
) -> None:
    marks = Marks.make(tmp_path)
    async with (
        LocalSlack() as slack,
        Fleet(slack, store_url, ref=AGENT, env={**DEFAULTS, **marks.env}) as fleet,
    ):
        [bot] = await fleet.start("all")
        began = time.monotonic()
        mentions = await asyncio.gather(
            *(_mention(slack, f"deploy api to prod #{n}") for n in range(SIZE))
        )
        acked = time.monotonic()
        first_tries = Counter(s for _, statuses, _ in mentions for s in statuses)
        refused = sum(n for status, n in first_tries.items() if status != 200)
        asked = {message.ts for message, _, taken in mentions if taken}
        lost = SIZE - len(asked)
        await poll(
            lambda: len(_by_thread(slack, cards=True)) >= len(asked),
            timeout=BURST_WAIT,
            every=0.25,
            what=f"{len(asked)} cards",
        )
        await bot.wait_idle(timeout=60)
        carded = time.monotonic()
        cards = _by_thread(slack, cards=True)
        assert set(cards) == asked
        assert all(len(posted) == 1 for posted in cards.values())

        clicks = await asyncio.gather(
            *(slack.click(BOB, posted[0].ts, ACTION_APPROVE) for posted in cards.values())
        )
        clicked = time.monotonic()
        assert Counter(r.status for r in clicks) == {200: len(cards)}
        # Every click ends in an answer or, if it could not be recorded, in an ephemeral.
        await poll(
            lambda: len(_by_thread(slack, cards=False)) + _not_recorded(slack) >= len(cards),
            timeout=BURST_WAIT,
            every=0.25,
            what=f"{len(cards)} answers",
        )
        await bot.wait_idle(timeout=60)
        answered = time.monotonic()
        print(
            f"\n{store_url.split(':', 1)[0]} x{SIZE}: mentions acked {acked - began:.1f}s, "
            f"cards {carded - began:.1f}s; clicks acked {clicked - carded:.1f}s, "
            f"answers {answered - carded:.1f}s; total {answered - began:.1f}s; "
            f"events refused at first {refused}, mentions lost {lost}, "
            f"clicks not recorded {_not_recorded(slack)}"
        )

        replies = _by_thread(slack, cards=False)
        assert Counter(m.text for posted in replies.values() for m in posted) == {DEPLOYED: SIZE}
        assert set(replies) == asked
        assert marks.count("deploy") == SIZE
        assert sorry(slack) == []
        # Slack got a 200 for every event the first time (a 503 makes it deliver it again).
        assert first_tries == {200: 2 * SIZE}
