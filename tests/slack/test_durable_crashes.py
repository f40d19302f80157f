"""kill -9 at each point of a turn and of a click, then another process (a restart, or one
already running) finishes the work: every tool ran exactly once, the card is there, the final
answer is in the thread, and the thread goes on (issue 8, "How it must behave").

The processes run with a 1 s work lease and a 2 s thread lease, so a dead process's work is
taken over within a few seconds.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from state import open_store

from .._local_slack import ApiCall, TestSlack
from .conftest import ALICE, BOB, CHANNEL
from .durable import (
    AGENT,
    INTERRUPTED,
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
from .processes import Fleet, HookedSlack

pytestmark = pytest.mark.slow


@pytest.fixture
def marks(tmp_path: Path) -> Marks:
    return Marks.make(tmp_path)


FOLLOW_UP = "what did I ask for?"


async def _thread_goes_on(slack: TestSlack, thread_ts: str, said: list[str]) -> None:
    """A follow-up mention in the thread is answered, from the whole conversation."""
    before = len(answers(slack, thread_ts))
    await slack.post_user_message(ALICE, CHANNEL, FOLLOW_UP, thread_ts=thread_ts)
    replies = await answer_in(slack, thread_ts, count=before + 1)
    assert replies[before] == "I have heard: " + " | ".join([*said, FOLLOW_UP])


def _env(marks: Marks) -> dict[str, str]:
    return {**QUICK, **marks.env}


async def test_kill_in_a_tool_before_its_result_is_saved(store_url: str, marks: Marks) -> None:
    """(a) A tool of a turn without approval kills its process; another process finishes the
    turn without running the tool again, and says the call was interrupted."""
    async with TestSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        await fleet.start("all", "all")
        marks.arm("lookup")
        asked = await slack.post_user_message(ALICE, CHANNEL, "lookup api")

        dead = await fleet.first_to_exit()
        assert dead.process.returncode == -signal.SIGKILL
        assert marks.pids("lookup") == [dead.pid]

        replies = await answer_in(slack, asked.ts)
        assert replies == [f"Tool said: {INTERRUPTED}"]
        await _thread_goes_on(slack, asked.ts, ["lookup api"])
        await fleet.live[0].wait_idle()
        assert marks.count("lookup") == 1
        assert len(answers(slack, asked.ts)) == 2
        assert sorry(slack) == []


@pytest.mark.parametrize("slack_kept_it", [False, True], ids=["card-lost", "card-posted"])
async def test_kill_after_the_pause_is_saved_before_the_card_is_posted(
    store_url: str, marks: Marks, slack_kept_it: bool
) -> None:
    """(b) The bot dies the moment its card's chat.postMessage reaches Slack, before the answer
    comes back (so it never learns the card's ts). Either Slack dropped the message with the
    connection (`card-lost`) or it posted it (`card-posted`). After a restart the card is in the
    thread, a click on it resumes the run, and the tool runs once."""
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        [first] = await fleet.start("all")

        def die_on_card(call: ApiCall) -> None:
            if call.method == "chat.postMessage" and call.args.get("blocks") and first.alive:
                slack.hooks.remove(die_on_card)
                os.kill(first.pid, signal.SIGKILL)
                if not slack_kept_it:
                    raise ConnectionResetError("the bot is gone; Slack drops the message")

        slack.hooks.append(die_on_card)
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        assert await fleet.first_to_exit() is first
        async with open_store(store_url) as store:
            # Killed where intended: the run is saved paused, its card not known to be posted.
            paused = await store.get_thread_run(CHANNEL, asked.ts)
            assert paused is not None
            run = await store.load_run(paused)
            assert run is not None and run.status == "paused"
            [record] = await store.run_interactions(paused)
            assert record.status == "pending" and record.message_ts is None
        lost = [] if slack_kept_it else cards(slack, asked.ts)
        assert lost == []

        await fleet.start("all")
        # The restarted process retries the mention: the saved run is replayed, not redone,
        # and its card is posted, or when Slack had kept it, found in the thread and kept: a
        # second card would keep its buttons after the answer.
        async with open_store(store_url) as store:
            for _ in range(400):
                now = await store.get_interaction(record.interaction_id)
                if now is not None and now.message_ts:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the retry never saved where the card is")
        await fleet.live[0].wait_idle()
        [card] = cards(slack, asked.ts)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        replies = await answer_in(slack, asked.ts)
        assert replies == ["Tool said: deployed api to prod"]
        assert approved_by(slack, card, BOB)
        await _thread_goes_on(slack, asked.ts, ["deploy api to prod"])
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 1
        assert len(answers(slack, asked.ts)) == 2
        assert sorry(slack) == []


async def test_kill_after_the_click_is_acked_before_it_is_claimed(
    store_url: str, marks: Marks
) -> None:
    """(c) A web process records the click and acks it, then dies; a worker process started
    afterwards claims the answer and resumes the run."""
    async with TestSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        web, worker = await fleet.start("web", "worker")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await worker.wait_idle()
        await fleet.kill(worker)

        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        await fleet.kill(web)
        async with open_store(store_url) as store:
            assert await store.inbox_size() == 1  # the click, recorded and not yet worked
            stored = await store.get_interaction(interaction_id(card))
            assert stored is not None and stored.status == "pending"
        assert answers(slack, asked.ts) == []

        await fleet.start("worker", "web")
        replies = await answer_in(slack, asked.ts)
        assert replies == ["Tool said: deployed api to prod"]
        assert approved_by(slack, card, BOB)
        await _thread_goes_on(slack, asked.ts, ["deploy api to prod"])
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 1
        assert len(answers(slack, asked.ts)) == 2
        assert sorry(slack) == []


async def test_kill_after_the_claim_before_the_card_shows_it(store_url: str, marks: Marks) -> None:
    """(c, later) The click is claimed, and the bot dies the moment its chat.update of the card
    reaches Slack, which drops it. After a restart the retried click shows the answer on the
    card and resumes the run; the tool runs once and nobody is told "already answered"."""
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await first.wait_idle()

        def die_on_update(call: ApiCall) -> None:
            if call.method == "chat.update" and call.args.get("ts") == card.ts and first.alive:
                slack.hooks.remove(die_on_update)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone; Slack drops the update")

        slack.hooks.append(die_on_update)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        async with open_store(store_url) as store:
            claimed = await store.get_interaction(interaction_id(card))
            assert claimed is not None and claimed.status == "answered"
        assert not approved_by(slack, card, BOB)

        await fleet.start("all")
        await slack.wait_for(
            lambda: answers(slack, asked.ts) or slack.ephemerals_for(BOB), timeout=20
        )
        assert [e.text for e in slack.ephemerals_for(BOB)] == []
        assert await answer_in(slack, asked.ts) == ["Tool said: deployed api to prod"]
        await fleet.live[0].wait_idle()
        assert approved_by(slack, card, BOB)
        await _thread_goes_on(slack, asked.ts, ["deploy api to prod"])
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 1
        assert sorry(slack) == []


async def test_kill_after_the_approved_tool_ran_before_the_resume_is_saved(
    store_url: str, marks: Marks
) -> None:
    """(d) The approved deploy runs, then kills its process before its result is saved; the
    other process finishes the resumed run without deploying again."""
    async with TestSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        await fleet.start("all", "all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await fleet.live[0].wait_idle()
        await fleet.live[1].wait_idle()

        marks.arm("deploy")
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        dead = await fleet.first_to_exit()
        assert dead.process.returncode == -signal.SIGKILL
        assert marks.pids("deploy") == [dead.pid]

        # The click's work item is retried by the other process, which must see the answer it
        # claimed as its own (not tell BOB that BOB already answered) and finish the resume.
        await slack.wait_for(
            lambda: answers(slack, asked.ts) or slack.ephemerals_for(BOB), timeout=20
        )
        assert [e.text for e in slack.ephemerals_for(BOB)] == []
        replies = await answer_in(slack, asked.ts)
        assert replies == [f"Tool said: {INTERRUPTED}"]
        assert approved_by(slack, card, BOB)
        await _thread_goes_on(slack, asked.ts, ["deploy api to prod"])
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 1
        assert len(answers(slack, asked.ts)) == 2
        assert sorry(slack) == []


async def test_kill_as_the_approved_tool_is_shown_running_before_its_started_mark(
    store_url: str, marks: Marks
) -> None:
    """(d, the other side of the mark) In an agent session the resumed turn shows the approved
    deploy as running, and the bot dies the moment that reaches Slack: the last I/O before the
    journal marks the call started. The restarted process's retry deploys once and answers with
    the deploy's own result, not "interrupted"."""
    async with (
        HookedSlack(agent_view=True) as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet,
    ):
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await first.wait_idle()

        def die_on_running(call: ApiCall) -> None:
            chunks = str(call.args.get("chunks"))
            if "in_progress" in chunks and "deploy" in chunks and first.alive:
                slack.hooks.remove(die_on_running)
                os.kill(first.pid, signal.SIGKILL)
                raise ConnectionResetError("the bot is gone")

        slack.hooks.append(die_on_running)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        assert marks.count("deploy") == 0

        [second] = await fleet.start("all")
        await poll(lambda: marks.count("deploy") >= 1, timeout=20, what="the deploy")
        await second.wait_idle()
        assert marks.pids("deploy") == [second.pid]
        streamed = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if m.chunks]
        assert "Tool said: deployed api to prod" in streamed
        assert INTERRUPTED not in str(slack.bot_messages(thread_ts=asked.ts))
        assert approved_by(slack, card, BOB)
        assert sorry(slack) == []


async def test_kill_after_a_tool_answered_by_a_thread_reply_ran(
    store_url: str, marks: Marks
) -> None:
    """(d, a question) The answer is a reply in the thread; the tool acts on it, then kills its
    process before its result is saved. The other process finishes the resumed run, without
    running the tool again and without taking the reply for a new message."""
    async with TestSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        await fleet.start("all", "all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "name 2.3")
        await card_in(slack, asked.ts)
        await fleet.live[0].wait_idle()
        await fleet.live[1].wait_idle()

        marks.arm("name_release")
        await slack.post_user_message(BOB, CHANNEL, "Falcon", thread_ts=asked.ts, mention=False)
        dead = await fleet.first_to_exit()
        assert marks.pids("name_release") == [dead.pid]

        replies = await answer_in(slack, asked.ts)
        assert replies == [f"Tool said: {INTERRUPTED}"]
        await _thread_goes_on(slack, asked.ts, ["name 2.3"])
        await fleet.live[0].wait_idle()
        assert marks.lines("name_release") == [f"{dead.pid} 2.3 Falcon"]
        assert len(answers(slack, asked.ts)) == 2
        assert sorry(slack) == []


async def test_kill_as_the_final_answer_is_posted_gives_one_answer(
    store_url: str, marks: Marks
) -> None:
    """(e) The bot dies the moment its final answer's chat.postMessage reaches Slack, which
    posts it; the bot never learns so and its work item is not done. The restarted process's
    retry replays the ended run and finds the answer in the thread: one final answer, one
    deploy (the double answer a Redis burst showed)."""
    async with HookedSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(marks)) as fleet:
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await first.wait_idle()

        def die_on_answer(call: ApiCall) -> None:
            text = str(call.args.get("text", ""))
            if call.method == "chat.postMessage" and text.startswith("Tool said") and first.alive:
                slack.hooks.remove(die_on_answer)
                os.kill(first.pid, signal.SIGKILL)  # Slack keeps the message

        slack.hooks.append(die_on_answer)
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await fleet.first_to_exit() is first
        assert answers(slack, asked.ts) == ["Tool said: deployed api to prod"]
        async with open_store(store_url) as store:
            assert await store.inbox_size() == 1  # the click's work, not done

        [second] = await fleet.start("all")
        async with open_store(store_url) as store:
            # The retried item is done once the new process finished it.
            for _ in range(300):
                if await store.inbox_size() == 0:
                    break
                await asyncio.sleep(0.1)
            assert await store.inbox_size() == 0
        await second.wait_idle()
        assert answers(slack, asked.ts) == ["Tool said: deployed api to prod"]
        assert marks.count("deploy") == 1
        assert sorry(slack) == []
