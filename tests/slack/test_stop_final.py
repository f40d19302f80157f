"""A stop is final, checked by the store with every claim: over real signed HTTP on both stores,
a stop pressed at any moment of a turn (before its run paused, while its card posts) ends it;
an approver whose click arrives after the stop is told who stopped the turn and nothing runs
(and the audit says so); the next message in the thread starts a new turn as usual."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_GRANT
from state import stop_mark

from .._local_slack import ApiCall, ChangeKind, TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL, BotFactory, Harness

ATTEMPTS = 10

# The moments of a turn a stop lands in: the session just showed `processing` (the run has not
# begun), the answer's stream opens (the model is running), the card is posting (the run paused).
MOMENTS = {
    "processing": lambda call: (
        call.method == "agents.sessions.setStatus" and call.args.get("status") == "processing"
    ),
    "streaming": lambda call: call.method == "chat.startStream",
    "card-posting": lambda call: (
        call.method == "chat.postMessage" and "Approval request" in str(call.args.get("text") or "")
    ),
}


class RacingSlack(TestSlack):
    """LocalSlack where the requester presses stop the moment a chosen Web API call arrives,
    and the approver clicks a card the moment it appears: neither waits for the bot."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.moment: str | None = None
        self.thread: str | None = None
        self.stops: list[int] = []
        self.clicks: list[int] = []
        self.watched: str | None = None
        """With `at`: press stop when this thread's session shows `processing` the `at`-th
        time (counted in `seen`)."""
        self.at = 0
        self.seen = 0

    async def publish(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        if self.at and kind == "call" and self.calls and not self.stops:
            call = self.calls[-1]
            if MOMENTS["processing"](call) and call.args.get("thread_ts") == self.watched:
                self.seen += 1
                if self.seen == self.at and self.watched is not None:
                    self.stops.append(await _stop(self, ALICE, self.watched))
        if self.moment is not None and kind == "call" and self.calls and not self.stops:
            call: ApiCall = self.calls[-1]
            thread = str(call.args.get("thread_ts") or "")
            if MOMENTS[self.moment](call) and thread:
                self.thread = thread
                self.stops.append(await _stop(self, ALICE, thread))
        await super().publish(kind, data)
        if (
            self.moment is not None
            and kind == "message"
            and "Approval request" in str(data.get("text") or "")
            and not self.clicks
        ):
            response = await self.click(BOB, str(data["ts"]), ACTION_APPROVE)
            self.clicks.append(response.status)


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with RacingSlack() as local:
        local.agent_refusal = None  # the app is an agent: its sessions have a stop button
        yield local


async def _stop(slack: TestSlack, user: str, thread_ts: str) -> int:
    response = await slack.send_event(
        {
            "type": "agent_session_stopped",
            "channel": CHANNEL,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": [],
            "event_ts": slack.new_ts(),
        }
    )
    return response.status


async def _settle(h: Harness) -> None:
    for _ in range(3):
        h.clock.advance(5)
        await h.bot.sweeper.run_until_idle()
        await h.bot.drain()


@pytest.mark.parametrize("moment", sorted(MOMENTS))
async def test_a_stop_at_any_moment_of_the_turn_is_final(
    make_bot: BotFactory, slack: RacingSlack, moment: str
) -> None:
    told_stopped = refusals = 0
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=BOB) as h:
        for attempt in range(ATTEMPTS):
            slack.stops.clear()
            slack.clicks.clear()
            slack.moment = moment
            before = len(h.ephemerals(BOB))
            await h.mention(ALICE, f"deploy api to prod ({attempt})")
            slack.moment = None
            await _settle(h)
            assert slack.stops == [200], (attempt, slack.stops)
            thread = slack.thread
            assert thread is not None
            assert agents.DEPLOYS == [], (attempt, agents.DEPLOYS)
            mark = await h.store.thread_stop(CHANNEL, thread)
            assert mark is not None and mark.user == ALICE
            run_id = await h.store.get_thread_run(CHANNEL, thread)
            assert run_id is not None
            run = await h.store.load_run(run_id)
            assert run is not None and run.status == "cancelled", (attempt, run)
            for record in await h.store.run_interactions(run_id):
                assert record.status != "answered", (attempt, record)
            new = h.ephemerals(BOB)[before:]
            if slack.clicks:
                # The card appeared (the run paused before the stop reached it) and the approver
                # clicked it before the stop's turn closed it: refused, told by whom.
                assert slack.clicks == [200]
                assert len(new) == 1, (attempt, new)
                assert f"stopped by <@{ALICE}>" in new[0] and "nothing runs" in new[0]
                if "not taken" in new[0]:
                    told_stopped += 1
                refused = [
                    e
                    for e in await h.store.recent_audit()
                    if e.action == "refused" and e.user == BOB
                ]
                assert len(refused) == refusals + 1, (attempt, refused)
                assert "stopped by" in (refused[0].detail or "")
                refusals += 1
        assert await h.store.settled_runs() == []
        print(f"{moment}: {told_stopped} of {ATTEMPTS} clicks refused by the stop guard")
        if moment == "card-posting":
            # Every time, the card was there to click before the stop's turn closed it.
            assert told_stopped == ATTEMPTS

        # The next message in the thread is a new turn: its card is approved and it runs.
        assert slack.thread is not None
        await h.reply(ALICE, slack.thread, "deploy api to prod, now")
        assert await h.click(BOB, h.card(slack.thread).ts, ACTION_APPROVE) == 200
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        run_id = await h.store.get_thread_run(CHANNEL, slack.thread)
        assert run_id is not None
        run = await h.store.load_run(run_id)
        assert run is not None and run.stop_seen == stop_mark(
            await h.store.thread_stop(CHANNEL, slack.thread)
        )


async def test_a_stop_after_the_recovery_claimed_a_grant_approved_run_stops_its_tool(
    make_bot: BotFactory, slack: RacingSlack
) -> None:
    """The grant approves the call, the recovery claims the run and its session shows
    `processing`; the requester presses stop then, before the tool starts: the store refuses
    the journal's started mark, the tool never runs (10 of 10), the stopper is not told it
    runs, and the next message still starts a new turn."""
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS=BOB) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        assert await h.click(BOB, h.card(asked.ts).ts, f"{ACTION_GRANT}:thread") == 200
        assert len(agents.DEPLOYS) == 1
        slack.watched = asked.ts
        for attempt in range(ATTEMPTS):
            slack.stops.clear()
            slack.seen, slack.at = 0, 2  # the reply's turn, then the resume's
            await h.reply(ALICE, asked.ts, f"deploy again ({attempt})")
            await _settle(h)
            slack.at = 0
            assert slack.stops == [200], (attempt, slack.seen)
            assert len(agents.DEPLOYS) == 1, attempt
            told = h.ephemerals(ALICE)
            assert not [t for t in told if "and runs" in t], told
        assert await h.store.settled_runs() == []
        await h.reply(ALICE, asked.ts, "deploy once more")
        await _settle(h)
        assert len(agents.DEPLOYS) == 2
