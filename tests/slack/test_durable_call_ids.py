"""A model server that names every tool call `call_0` (some OpenAI-compatible servers do): two
identical requests in two threads still get two cards with their own interaction ids, and each
click resumes its own thread (issue 8)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE

from .._local_slack import TestSlack
from .conftest import ALICE, BOB, CAROL, CHANNEL
from .durable import (
    QUICK,
    Marks,
    answer_in,
    answers,
    approved_by,
    card_in,
    cards,
    interaction_id,
    poll,
    sorry,
)
from .processes import Fleet

pytestmark = pytest.mark.slow

AGENT = "tests.slack.agents:call_0_agent"
DEPLOYED = "Tool said: deployed api to prod"


async def test_identical_requests_with_call_0_resume_their_own_threads(
    store_url: str, tmp_path: Path
) -> None:
    marks = Marks.make(tmp_path)
    async with (
        TestSlack() as slack,
        Fleet(slack, store_url, ref=AGENT, env={**QUICK, **marks.env}) as fleet,
    ):
        await fleet.start("all")
        first, second = await asyncio.gather(
            slack.post_user_message(ALICE, CHANNEL, "deploy api to prod"),
            slack.post_user_message(ALICE, CHANNEL, "deploy api to prod"),
        )
        one, two = await card_in(slack, first.ts), await card_in(slack, second.ts)
        await fleet.live[0].wait_idle()
        assert interaction_id(one) != interaction_id(two)

        # Clicked in the other order than they were asked, each by someone else.
        assert (await slack.click(CAROL, two.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, second.ts) == [DEPLOYED]
        await fleet.live[0].wait_idle()
        assert answers(slack, first.ts) == []  # the first thread still waits for its answer
        assert (await slack.click(BOB, one.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, first.ts) == [DEPLOYED]
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 2
        assert approved_by(slack, one, BOB) and approved_by(slack, two, CAROL)

        # The same request again in the first thread: its call is `call_0` once more.
        await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod", thread_ts=first.ts)
        await poll(lambda: len(cards(slack, first.ts)) == 2, timeout=20, what="a second card")
        again = cards(slack, first.ts)[1]
        assert interaction_id(again) not in {interaction_id(one), interaction_id(two)}
        assert (await slack.click(BOB, again.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, first.ts, count=2) == [DEPLOYED, DEPLOYED]
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 3
        assert answers(slack, second.ts) == [DEPLOYED]
        assert sorry(slack) == []
