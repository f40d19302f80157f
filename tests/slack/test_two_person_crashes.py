"""kill -9 in the middle of a vote of the two-person rule (`Approval(count=2)`), with real
`handback run` processes on both stores: the click's work item is retried by another process
after its lease, and the retry finishes what the vote started. A vote counts once, its voter is
not told "you already approved", and the approved tool runs once.

The processes run with a 1 s work lease and a 2 s thread lease, so a dead process's work is
taken over within a few seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from state import Store, open_store

from .._local_slack import ApiCall, Message, TestSlack
from .conftest import ALICE, BOB, CAROL, CHANNEL
from .durable import QUICK, Marks, answer_in, answers, card_in, interaction_id, sorry
from .processes import Fleet, HookedSlack

pytestmark = pytest.mark.slow

AGENT = "tests.slack.agents:durable_two_person_agent"
ASKED = "deploy api"
DEPLOYED = "Tool said: deployed api to prod"
ONE_OF_TWO = f"1 of 2 approved:* <@{BOB}>"
BOTH = f"Approved* by <@{BOB}> and <@{CAROL}>"


@pytest.fixture
def marks(tmp_path: Path) -> Marks:
    return Marks.make(tmp_path)


def _env(marks: Marks) -> dict[str, str]:
    return {**QUICK, **marks.env}


def _shown(slack: TestSlack, card: Message) -> str:
    """The card's blocks as they are in the channel now."""
    now = slack.message(CHANNEL, card.ts)
    assert now is not None
    return str(now.blocks)


def _updates_card(call: ApiCall, card: Message, text: str) -> bool:
    return (
        call.method == "chat.update" and call.args.get("ts") == card.ts and text in str(call.args)
    )


async def _audit(store_url: str, action: str) -> list[tuple[str | None, str]]:
    async with open_store(store_url) as store:
        return [(e.user, e.detail) for e in await store.recent_audit() if e.action == action]


async def test_a_vote_retried_after_a_crash_counts_once(store_url: str, marks: Marks) -> None:
    """BOB's Approve is stored as the first of two votes, and the bot dies the moment its
    chat.update of the card ("1 of 2 approved") reaches Slack, which drops it. The process that
    retries the click's work item shows the vote on the card without counting it again and
    without telling BOB he already approved; CAROL's Approve then deploys, once."""
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, ASKED)
        card = await card_in(slack, asked.ts)
        await first.wait_idle()
        assert ONE_OF_TWO not in _shown(slack, card)

        def die_on_votes(call: ApiCall) -> None:
            if _updates_card(call, card, "1 of 2 approved") and first.alive:
                slack.hooks.remove(die_on_votes)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone; Slack drops the update")

        slack.hooks.append(die_on_votes)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        async with open_store(store_url) as store:
            # Killed where intended: the vote is stored, the card does not show it.
            voted = await store.get_interaction(interaction_id(card))
            assert voted is not None and voted.status == "pending"
            assert [v.user for v in voted.votes] == [BOB]
            assert await store.inbox_size() == 1  # the click, not done
        assert ONE_OF_TWO not in _shown(slack, card)

        [second] = await fleet.start("all")
        # The retry's outcome, whatever it is: the vote shown, BOB told something, or the
        # approval taken as complete (the card closed, or the deploy run).
        await slack.wait_for(
            lambda: (
                ONE_OF_TWO in _shown(slack, card)
                or ACTION_APPROVE not in _shown(slack, card)
                or slack.ephemerals_for(BOB)
                or marks.count("deploy")
            ),
            timeout=20,
        )
        await second.wait_idle()
        async with open_store(store_url) as store:
            assert await store.inbox_size() == 0
            retried = await store.get_interaction(interaction_id(card))
            assert retried is not None and retried.status == "pending"
            assert [v.user for v in retried.votes] == [BOB]
        assert [e.text for e in slack.ephemerals_for(BOB)] == []
        assert ONE_OF_TWO in _shown(slack, card)
        assert ACTION_APPROVE in _shown(slack, card)  # still open for the second approver
        assert await _audit(store_url, "refused") == []
        assert await _audit(store_url, "answered") == [(BOB, "approved 1 of 2")]
        assert marks.count("deploy") == 0
        assert answers(slack, asked.ts) == []

        assert (await slack.click(CAROL, card.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, asked.ts) == [DEPLOYED]
        await second.wait_idle()
        shown = _shown(slack, card)
        assert BOTH in shown and ACTION_APPROVE not in shown
        async with open_store(store_url) as store:
            answered = await store.get_interaction(interaction_id(card))
            assert answered is not None and answered.status == "answered"
            assert answered.answer == {"approved": True, "approvers": [BOB, CAROL]}
        assert await _audit(store_url, "answered") == [
            (CAROL, "approved 2 of 2"),
            (BOB, "approved 1 of 2"),
        ]
        assert marks.lines("deploy") == [f"{second.pid} api prod"]
        assert answers(slack, asked.ts) == [DEPLOYED]
        assert await _audit(store_url, "refused") == []
        assert slack.ephemerals == []
        assert sorry(slack) == []


async def test_the_last_vote_retried_after_a_crash_resumes_once(
    store_url: str, marks: Marks
) -> None:
    """CAROL's Approve is the second vote: it answers the approval and claims the run, the card
    closes, and the bot dies the moment the resumed turn's first Slack call reaches Slack
    (before the deploy ran). The process that retries the click's work item resumes the run
    once: the deploy runs once, the card names both approvers, and nobody is told "already"."""
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, ASKED)
        card = await card_in(slack, asked.ts)
        await first.wait_idle()
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        await slack.wait_for(lambda: ONE_OF_TWO in _shown(slack, card), timeout=20)
        await first.wait_idle()

        closed: list[ApiCall] = []
        killed_at: list[ApiCall] = []

        def die_when_resumed(call: ApiCall) -> None:
            if not first.alive:
                return
            if not closed:
                if _updates_card(call, card, "Approved"):
                    closed.append(call)  # the claim's own update of the card goes through
                return
            killed_at.append(call)
            slack.hooks.remove(die_when_resumed)
            os.kill(first.pid, signal.SIGKILL)
            raise ConnectionResetError("the bot is gone")

        slack.hooks.append(die_when_resumed)
        assert (await slack.click(CAROL, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        assert closed and killed_at, "the bot did not die in the resumed turn"
        assert marks.count("deploy") == 0  # killed before the deploy ran
        async with open_store(store_url) as store:
            # Killed where intended: the last vote answered the approval, the run was claimed
            # for its resume, and the click's work item is not done.
            answered = await store.get_interaction(interaction_id(card))
            assert answered is not None and answered.status == "answered"
            assert answered.answer == {"approved": True, "approvers": [BOB, CAROL]}
            run = await store.load_run(answered.run_id)
            assert run is not None and run.status == "paused" and run.resumed_by is not None
            assert await store.inbox_size() == 1
        assert answers(slack, asked.ts) == []

        [second] = await fleet.start("all")
        await slack.wait_for(lambda: answers(slack, asked.ts) or slack.ephemerals, timeout=20)
        assert [e.text for e in slack.ephemerals] == []
        assert await answer_in(slack, asked.ts) == [DEPLOYED]
        await second.wait_idle()
        async with open_store(store_url) as store:
            assert await store.inbox_size() == 0
            after = await store.get_interaction(interaction_id(card))
            assert after is not None and after.answer == answered.answer
            assert [v.user for v in after.votes] == [BOB, CAROL]
        assert marks.lines("deploy") == [f"{second.pid} api prod"]
        assert answers(slack, asked.ts) == [DEPLOYED]
        shown = _shown(slack, card)
        assert BOTH in shown and ACTION_APPROVE not in shown
        assert await _audit(store_url, "answered") == [
            (CAROL, "approved 2 of 2"),
            (BOB, "approved 1 of 2"),
        ]
        assert await _audit(store_url, "refused") == []
        assert slack.ephemerals == []
        assert sorry(slack) == []


async def test_a_vote_retried_after_the_last_vote_closed_it_is_not_refused(
    store_url: str, marks: Marks
) -> None:
    """BOB's vote is stored and his process dies before the card shows it; before his click's
    work item is retried (the work lease is longer here), CAROL's Approve is the second
    vote and deploys. BOB's retry then finds the approval answered with his own vote in it: it
    is his own earlier work, not a late click, so he is told nothing and nothing is refused;
    the run is not resumed again and the deploy ran once."""
    # A work lease long enough for CAROL's click to be worked first: the dead process's lease
    # (SQLite keeps it with the item; Redis: the entry's idle time) is 8 s.
    env = {**_env(marks), "HANDBACK_LIVENESS_TTL": "8s"}
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=env) as fleet:
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, ASKED)
        card = await card_in(slack, asked.ts)
        await first.wait_idle()

        def die_on_votes(call: ApiCall) -> None:
            if _updates_card(call, card, "1 of 2 approved") and first.alive:
                slack.hooks.remove(die_on_votes)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone; Slack drops the update")

        slack.hooks.append(die_on_votes)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first

        [second] = await fleet.start("all")
        assert (await slack.click(CAROL, card.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, asked.ts) == [DEPLOYED]
        await second.wait_idle()
        async with open_store(store_url) as store:
            assert await store.inbox_size() == 1  # BOB's click, not retried yet
            await _drained(store, timeout=20)
        await second.wait_idle()

        assert [e.text for e in slack.ephemerals] == []
        assert await _audit(store_url, "refused") == []
        assert await _audit(store_url, "answered") == [
            (CAROL, "approved 2 of 2"),
            (BOB, "approved 1 of 2"),
        ]
        shown = _shown(slack, card)
        assert BOTH in shown and ACTION_APPROVE not in shown
        assert marks.lines("deploy") == [f"{second.pid} api prod"]
        assert answers(slack, asked.ts) == [DEPLOYED]
        assert sorry(slack) == []


async def _drained(store: Store, *, timeout: float) -> None:  # noqa: ASYNC109
    """Until the inbox is empty: every work item done."""
    deadline = time.monotonic() + timeout
    while left := await store.inbox_size():
        if time.monotonic() > deadline:
            raise AssertionError(f"{left} work item(s) still in the inbox after {timeout}s")
        await asyncio.sleep(0.05)
