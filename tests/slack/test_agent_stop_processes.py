"""The stop button and retries with real `handback run` processes: the stop reaches the turn in
whichever process runs it, within a second, and a turn retried after a crash streams its answer
once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from state import open_store

from .._local_slack import ApiCall, TestSlack
from .conftest import ALICE, BOB, CHANNEL
from .durable import AGENT, QUICK, Marks, card_in, poll
from .processes import Fleet, HookedSlack

pytestmark = pytest.mark.slow


@pytest.fixture
def marks(tmp_path: Path) -> Marks:
    return Marks.make(tmp_path)


def _env(marks: Marks) -> dict[str, str]:
    return {**QUICK, **marks.env}


def _status(slack: TestSlack, thread_ts: str) -> str | None:
    session = slack.sessions.get((CHANNEL, thread_ts))
    return None if session is None else session.status


@pytest.mark.parametrize(
    ("verb", "mark"),
    [("slow", "slow"), ("blocking", "slow"), ("ponder", "ponder")],
    ids=["async-tool", "sync-tool", "model-call"],
)
async def test_a_stop_at_the_web_process_ends_the_turn_in_the_worker(
    store_url: str, marks: Marks, verb: str, mark: str
) -> None:
    async with (
        TestSlack(agent_view=True) as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet,
    ):
        [web, worker] = await fleet.start("web", "worker")
        asked = await slack.post_user_message(ALICE, CHANNEL, f"{verb} api")
        await poll(lambda: marks.count(mark) >= 1, timeout=20, what=f"{mark} started")
        await slack.wait_for(lambda: _status(slack, asked.ts) == "processing", timeout=5)

        pressed = time.monotonic()
        assert (await slack.press_stop(ALICE, CHANNEL, asked.ts)).status == 200
        await slack.wait_for(lambda: _status(slack, asked.ts) == "active", timeout=5)
        took = time.monotonic() - pressed
        assert took < 1.0, f"stopped after {took:.2f}s"

        marks.release()
        await worker.wait_idle()
        await web.wait_idle()
        if verb != "blocking":
            # Cancelled where it waited: it never got to its end.
            assert [line.split()[1] for line in marks.lines(mark)] == ["start"]
        async with open_store(store_url) as store:
            run_id = await store.get_thread_run(CHANNEL, asked.ts)
            assert run_id is not None
            run = await store.load_run(run_id)
            assert run is not None and (run.status, run.reason) == ("cancelled", "interrupted")
            if verb != "ponder":
                # A sync tool's thread ran on, but its result was not taken.
                assert run.transcript[-1]["content"] == "Interrupted: the run was stopped."
            assert "stopped" in [e.action for e in await store.recent_audit()]
        texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
        tool = {"slow": "slow", "blocking": "slow_sync"}.get(verb)
        if tool is None:  # stopped in the model call: no tool was running
            assert texts[-1] == f"Stopped by <@{ALICE}>."
        else:
            assert texts[-1] == (
                f"Stopped by <@{ALICE}>: `{tool}` was interrupted while it ran: it may or may "
                "not have taken effect."
            )
        assert _status(slack, asked.ts) == "active"
        assert not [m for m in slack.bot_messages(thread_ts=asked.ts) if m.streaming]


async def test_a_turn_retried_after_a_crash_streams_its_answer_once(
    store_url: str, marks: Marks
) -> None:
    """The bot dies as its `chat.stopStream` reaches Slack (the stream stays open); the process
    that retries the turn stops that stream, takes its partial message away, and streams the
    answer once."""
    async with (
        HookedSlack(agent_view=True) as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet,
    ):
        [first] = await fleet.start("all")

        def die_on_stop(call: ApiCall) -> None:
            if call.method == "chat.stopStream" and first.alive:
                slack.hooks.remove(die_on_stop)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone")

        slack.hooks.append(die_on_stop)
        asked = await slack.post_user_message(ALICE, CHANNEL, "lookup api")
        assert await fleet.first_to_exit() is first
        left_open = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.streaming]
        assert len(left_open) == 1

        [second] = await fleet.start("all")
        await slack.wait_for(lambda: _status(slack, asked.ts) == "active", timeout=20)
        await second.wait_idle()
        streamed = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.chunks]
        assert [m.text for m in streamed] == ["Tool said: api runs 2.3"]
        assert not streamed[0].streaming
        assert marks.count("lookup") == 1


async def test_a_resume_retried_after_a_crash_streams_its_answer_once(
    store_url: str, marks: Marks
) -> None:
    """The same for the turn an approval resumes: the bot dies as the resumed turn's
    `chat.stopStream` reaches Slack; the process that retries the click's work item stops the
    open stream, takes its partial message away, and streams the answer once, without running
    the approved tool again."""
    async with (
        HookedSlack(agent_view=True) as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet,
    ):
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api")
        card = await card_in(slack, asked.ts)
        await slack.wait_for(lambda: _status(slack, asked.ts) == "suspended", timeout=10)

        def die_on_stop(call: ApiCall) -> None:
            if call.method == "chat.stopStream" and first.alive:
                slack.hooks.remove(die_on_stop)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone")

        slack.hooks.append(die_on_stop)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        resumed = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.streaming]
        assert len(resumed) == 1  # the tool's task, left open
        left_open = resumed[0].ts

        [second] = await fleet.start("all")
        await slack.wait_for(lambda: _status(slack, asked.ts) == "active", timeout=20)
        await second.wait_idle()
        streamed = [m for m in slack.bot_messages(thread_ts=asked.ts) if m.chunks]
        assert left_open not in [m.ts for m in streamed]
        assert [m.text for m in streamed if m.text] == ["Tool said: deployed api to prod"]
        assert not [m for m in streamed if m.streaming]
        assert marks.count("deploy") == 1


async def test_a_stopped_turn_whose_process_died_is_not_carried_on(
    store_url: str, marks: Marks
) -> None:
    """The process that stopped a turn dies before its work item is done; the process that
    retries the item sees the stop mark and does not carry on with the stopped run (a run
    handed on at shutdown, also `cancelled/interrupted`, would be continued)."""
    async with (
        HookedSlack(agent_view=True) as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet,
    ):
        [first] = await fleet.start("all")

        def die_when_stopped(call: ApiCall) -> None:
            if (
                call.method == "agents.sessions.setStatus"
                and call.args.get("status") == "active"
                and first.alive
            ):
                slack.hooks.remove(die_when_stopped)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone")

        slack.hooks.append(die_when_stopped)
        asked = await slack.post_user_message(ALICE, CHANNEL, "slow api")
        await poll(lambda: marks.count("slow") >= 1, timeout=20, what="slow started")
        await slack.wait_for(lambda: _status(slack, asked.ts) == "processing", timeout=5)
        await slack.press_stop(ALICE, CHANNEL, asked.ts)
        assert await fleet.first_to_exit() is first

        [second] = await fleet.start("all")
        await slack.wait_for(lambda: _status(slack, asked.ts) == "active", timeout=20)
        marks.release()
        await second.wait_idle()
        texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
        assert not [t for t in texts if "Tool said" in t], texts
        assert marks.count("slow") == 1
        async with open_store(store_url) as store:
            run_id = await store.get_thread_run(CHANNEL, asked.ts)
            assert run_id is not None
            run = await store.load_run(run_id)
            assert run is not None and (run.status, run.reason) == ("cancelled", "interrupted")
