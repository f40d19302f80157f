"""Turns as Slack agent sessions, over real HTTP against a LocalSlack that declares the app an
agent: the session status follows the run, the answer streams in few calls, tool calls are
tasks, a pause is `suspended` with its card after the stream, and the classic fallback."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.models.messages.chunk import Chunk

from blocks import ACTION_APPROVE, escape
from bot import Agent, ModelResponse, Tool

from .._local_slack import ApiCall, TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL, BotFactory, calls_to

NOT_AN_AGENT = ["missing_scope", "not_authorized", "unknown_method"]
"""What Slack answers an app not declared as an agent (no `features.agent_view`, no
`assistant:write`) for the agent methods."""

STOP_LOOKS = 1.0
"""Seconds in which the app has looked at a thread's stop mark at least once while a turn runs:
a stop pressed anywhere ends the turn within a second (pinned in
`test_a_resumed_turn_starts_from_the_stop_mark_read_with_its_claim`)."""

AGENT_METHODS = {
    "agents.sessions.setStatus",
    "chat.startStream",
    "chat.appendStream",
    "chat.stopStream",
    "chat.postMessage",
    "chat.update",
    "chat.delete",
    "reactions.add",
}


@pytest.fixture(autouse=True)
def _declared_as_agent(slack: TestSlack) -> None:
    slack.agent_refusal = None


def _calls(slack: TestSlack, since: int = 0) -> list[ApiCall]:
    return [c for c in slack.calls[since:] if c.method in AGENT_METHODS and c.status == 200]


def _chunks(call: ApiCall) -> list[dict[str, Any]]:
    """The call's chunks, each parsed by slack_sdk's model and given back as it would send it."""
    chunks = []
    for raw in call.args.get("chunks") or []:
        parsed = Chunk.parse(raw)
        assert parsed is not None, raw
        assert parsed.to_dict() == raw
        chunks.append(raw)
    return chunks


def _tasks(call: ApiCall) -> list[tuple[str, str]]:
    return [(c["title"], c["status"]) for c in _chunks(call) if c["type"] == "task_update"]


def _text(call: ApiCall) -> str:
    return "".join(c["text"] for c in _chunks(call) if c["type"] == "markdown_text")


async def test_an_approval_shows_as_a_session_that_suspends_and_resumes(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        turn = _calls(slack)
        assert [c.method for c in turn] == [
            "agents.sessions.setStatus",
            "chat.startStream",
            "chat.postMessage",
            "chat.stopStream",
            "chat.delete",
        ]
        status, start, card, stop, delete = turn
        assert status.args["status"] == "processing"
        assert status.args["title"] == "deploy api to prod"
        assert status.args["initiator_user_id"] == ALICE
        assert start.args["recipient_user_id"] == ALICE
        assert start.args["recipient_team_id"] == slack.team_id
        assert _tasks(start) == [("deploy", "in_progress")]
        assert card.args["blocks"] and card.args["thread_ts"] == asked.ts
        # The stream said nothing the card does not: it goes, and the card is the request.
        assert stop.args["session_status"] == "suspended"
        assert delete.args["ts"] == stop.args["ts"]
        [only] = h.bot_replies(asked.ts)
        assert only.blocks and not only.chunks
        assert agents.DEPLOYS == []

        before = len(slack.calls)
        await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)
        resumed = _calls(slack, before)
        assert [c.method for c in resumed] == [
            "chat.update",
            "agents.sessions.setStatus",
            "chat.startStream",
            "chat.appendStream",
            "chat.stopStream",
        ]
        update, status, start, append, stop = resumed
        assert "Approved" in str(update.args["blocks"])
        assert status.args["status"] == "processing"
        assert _tasks(start) == [("deploy", "in_progress")]
        assert _tasks(append) == [("deploy", "complete")]
        assert _chunks(append)[0]["output"] == "deployed api to prod"
        assert _text(stop) == "Tool said: deployed api to prod"
        assert stop.args["session_status"] == "active"
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]

        session = slack.sessions[(CHANNEL, asked.ts)]
        assert session.history == ["processing", "suspended", "processing", "active"]
        streamed = [m for m in h.bot_replies(asked.ts) if m.chunks]
        assert all(not m.streaming for m in streamed)
        assert streamed[-1].text == "Tool said: deployed api to prod"
        assert not any(m.reactions for m in slack.messages)


class _Trickle:
    """A model that writes `text` in 50-character deltas, as a streaming model server does."""

    name = "trickle"

    def __init__(self, text: str) -> None:
        self.text = text

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        if stream:
            for start in range(0, len(self.text), 50):
                yield self.text[start : start + 50]
                await asyncio.sleep(0)
        yield ModelResponse(text=self.text)


LONG = "".join(f"line {n:04d}: a <b> & c\n" for n in range(240))[:5000]


@pytest.mark.parametrize("rate_limited", [False, True], ids=["plain", "429-on-append"])
async def test_a_long_answer_streams_whole_in_few_calls(
    make_bot: BotFactory, slack: TestSlack, rate_limited: bool
) -> None:
    assert len(LONG) == 5000
    agent = Agent(name="writer", model=_Trickle(LONG))
    if rate_limited:
        slack.fail_next("chat.appendStream", status=429, retry_after=1)
    async with make_bot(agent) as h:
        before = len(slack.calls)
        asked = await h.mention(ALICE, "write a lot")
        made = slack.calls[before:]
        assert len(made) <= 20, [c.method for c in made]
        [message] = [m for m in h.bot_replies(asked.ts) if m.chunks]
        assert message.text == escape(LONG)
        assert not message.streaming
        if rate_limited:
            limited = [c for c in made if c.status == 429]
            assert [c.method for c in limited] == ["chat.appendStream"]
        assert slack.sessions[(CHANNEL, asked.ts)].status == "active"


def _fail(service: str) -> str:
    """Fail at once."""
    raise RuntimeError(f"cannot reach <{service}>")


async def test_a_failing_tool_is_an_error_task_and_its_output_is_escaped(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return "it failed"
        return [{"name": "_fail", "arguments": {"service": "<!channel>"}}]

    from bot.testing import FunctionModel

    agent = Agent(name="failer", model=FunctionModel(script), tools=[Tool(_fail)])
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "try it")
        [message] = [m for m in h.bot_replies(asked.ts) if m.chunks]
        [task] = message.tasks().values()
        assert task["status"] == "error"
        assert "<!channel>" not in task["output"] and "&lt;!channel&gt;" in task["output"]
        assert message.text == "it failed"


# What Slack answers an app without `features.agent_view` is not on docs.slack.dev's method
# pages we could read; each answer that says so (`NOT_AN_AGENT`) is pinned here.
@pytest.mark.parametrize("refusal", NOT_AN_AGENT)
async def test_an_app_that_is_not_an_agent_falls_back_once_with_one_log_line(
    make_bot: BotFactory, slack: TestSlack, caplog: pytest.LogCaptureFixture, refusal: str
) -> None:
    slack.agent_refusal = refusal
    caplog.set_level(logging.WARNING, logger="handback.slack")
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        first = await h.mention(ALICE, "deploy api to prod")
        await h.click(BOB, h.card(first.ts).ts, ACTION_APPROVE)
        second = await h.mention(ALICE, "deploy web to prod")
        assert h.texts(first.ts) == ["Tool said: deployed api to prod"]
        assert h.card(second.ts)
    fallbacks = [r for r in caplog.records if "not set up as an agent" in r.getMessage()]
    assert len(fallbacks) == 1
    refused = [c for c in slack.calls if c.method.startswith(("agents.", "chat.startStream"))]
    assert len(refused) == 1  # asked once, then classic for the rest of the process
    assert calls_to(slack, "reactions.add")


async def test_classic_setting_never_calls_the_agent_methods(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_SLACK_UI="classic") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        assert h.card(asked.ts)
    assert not [c for c in slack.calls if c.method.startswith(("agents.", "chat.startStream"))]


# ------------------------------------------------------------------ the stop button


class _Gate:
    """An async tool that waits until released, noting when it started and whether it ended."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.ended = False

    async def restart(self, service: str) -> str:
        """Restart a service, slowly."""
        self.started.set()
        await self.release.wait()
        self.ended = True
        return f"restarted {service}"


async def test_stop_ends_a_turn_in_a_slow_tool_within_a_second(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    gate = _Gate()

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "restart", "arguments": {"service": "api"}}]

    from bot.testing import FunctionModel

    agent = Agent(name="slow", model=FunctionModel(script), tools=[Tool(gate.restart)])
    async with make_bot(agent) as h:
        asked = await slack.post_user_message(ALICE, CHANNEL, "restart api")
        await asyncio.wait_for(gate.started.wait(), timeout=10)
        pressed = time.monotonic()
        assert (await slack.press_stop(ALICE, CHANNEL, asked.ts)).status == 200
        await asyncio.wait_for(h.bot.drain(), timeout=5)
        took = time.monotonic() - pressed
        assert took < 1.0, took
        gate.release.set()
        await asyncio.sleep(0.05)
        assert not gate.ended
        session = slack.sessions[(CHANNEL, asked.ts)]
        assert session.status == "active"
        assert h.texts(asked.ts)[-1] == (
            f"Stopped by <@{ALICE}>: `restart` was interrupted while it ran: it may or may not "
            "have taken effect."
        )
        run_id = await h.store.get_thread_run(CHANNEL, asked.ts)
        assert run_id is not None
        run = await h.store.load_run(run_id)
        assert run is not None and (run.status, run.reason) == ("cancelled", "interrupted")
        audit = await h.store.recent_audit()
        assert [(e.action, e.user) for e in audit if e.action == "stopped"] == [("stopped", ALICE)]

        # The thread goes on from the stopped run, and the old stop does not stop the next turn.
        gate.started.clear()
        gate.release.clear()
        await slack.post_user_message(ALICE, CHANNEL, "restart api", thread_ts=asked.ts)
        await asyncio.wait_for(gate.started.wait(), timeout=10)
        await asyncio.sleep(STOP_LOOKS)
        gate.release.set()
        await h.bot.drain()
        assert h.texts(asked.ts)[-1] == "Tool said: restarted api"
        assert h.texts(asked.ts)[-2].startswith(f"Stopped by <@{ALICE}>: `restart` was interrupted")


async def test_a_resumed_turn_starts_from_the_stop_mark_read_with_its_claim(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    """A click's turn learns the thread's stop mark with its claim (no read of its own): a
    stop pressed while it runs ends it within a second, and the stop that ended the thread's
    previous turn does not end the next one."""
    gate = _Gate()

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "restart", "arguments": {"service": "api"}}]

    from bot.testing import FunctionModel

    tool = Tool(gate.restart, requires_approval=True)
    agent = Agent(name="slow", model=FunctionModel(script), tools=[tool])
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart api")
        # Two stops by the one who asked: marks differ by event, so the second is a new stop.
        for turn, stopper in enumerate((ALICE, ALICE)):
            if turn:
                await h.reply(ALICE, asked.ts, "restart api again")
            gate.started.clear()
            assert (await slack.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)).status == 200
            await asyncio.wait_for(gate.started.wait(), timeout=10)
            await asyncio.sleep(STOP_LOOKS)  # an older stop, if any, would have ended it
            assert slack.sessions[(CHANNEL, asked.ts)].status == "processing"
            pressed = time.monotonic()
            assert (await slack.press_stop(stopper, CHANNEL, asked.ts)).status == 200
            await asyncio.wait_for(h.bot.drain(), timeout=5)
            assert time.monotonic() - pressed < 1.0
            assert h.texts(asked.ts)[-1] == (
                f"Stopped by <@{stopper}>: `restart` was interrupted while it ran: it may or "
                "may not have taken effect."
            )
            # The approved card says so too: it does not read as if the tool simply ran.
            card = slack.message(CHANNEL, h.card(asked.ts).ts)
            assert card is not None and "Approved" in str(card.blocks)
            assert (
                f":octagonal_sign: Stopped by <@{stopper}>: it was interrupted while it ran and "
                "may or may not have taken effect." in str(card.blocks)
            )
            assert slack.sessions[(CHANNEL, asked.ts)].status == "active"
        gate.release.set()
        assert not gate.ended


async def test_stop_closes_the_open_card_and_cancels_its_run(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await slack.press_stop(ALICE, CHANNEL, asked.ts)
        await h.bot.drain()
        closed = slack.message(CHANNEL, card.ts)
        assert closed is not None
        assert f"This request was stopped by <@{ALICE}> before `deploy` ran: it did not run." in (
            str(closed.blocks)
        )
        assert ACTION_APPROVE not in str(closed.blocks)
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "cancelled"
        run_id = await h.store.get_thread_run(CHANNEL, asked.ts)
        assert run_id is not None
        run = await h.store.load_run(run_id)
        assert run is not None and (run.status, run.reason) == ("cancelled", "cancelled")
        assert slack.sessions[(CHANNEL, asked.ts)].status == "active"
        actions = [e.action for e in await h.store.recent_audit()]
        assert "stopped" in actions and "cancelled" in actions
        assert [m.text for m in h.bot_replies(asked.ts) if m.chunks][-1] == (
            f"Stopped (stopped by <@{ALICE}>)."
        )
