"""Nothing a person can see in Slack gives the bot's internals away: a model or a tool that
raises in the middle of a resume is told in people's words, without a traceback, an exception's
class path or what the error said. Each test ends by checking everything Slack shows."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.testing import FunctionModel
from bot.tools import confirm

from .conftest import ALICE, BOB, LEAKS, BotFactory

pytestmark = pytest.mark.usefixtures("nothing_leaks")


def test_the_leak_check_can_fail() -> None:
    assert LEAKS.search('Traceback (most recent call last):\n  File "x.py", line 3')
    assert LEAKS.search("slack_sdk.errors.SlackApiError")
    assert LEAKS.search("RuntimeError: boom")
    assert LEAKS.search("KeyError('user')")
    assert not LEAKS.search("This was already answered by <@U0BOB>.")
    assert not LEAKS.search("Sorry, something went wrong on my side.")


def _fail_on_resume(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if messages[-1]["role"] == "tool":
        raise RuntimeError("model server fell over at /srv/secret")
    return [{"name": "confirm", "arguments": {"action": "Restart api?"}}]


async def test_model_raising_mid_resume_is_a_friendly_message(make_bot: BotFactory) -> None:
    agent = Agent(name="fails-late", model=FunctionModel(_fail_on_resume), tools=[confirm])
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart")
        await h.click(BOB, h.card(asked.ts).ts, "hb:confirm")
        [reply] = h.texts(asked.ts)
        assert "went wrong" in reply or "did not work" in reply
        assert "/srv/secret" not in reply and "RuntimeError" not in reply


async def test_tool_raising_mid_resume_is_a_friendly_message(make_bot: BotFactory) -> None:
    def explode(service: str) -> str:
        """Restart a service."""
        raise OSError(f"/etc/secret/{service} is not writable")

    agent = Agent(
        name="explode",
        model=FunctionModel(
            lambda m: (
                ("the restart failed" if "failed" in str(m[-1]["content"]) else "ok")
                if m[-1]["role"] == "tool"
                else [{"name": "explode", "arguments": {"service": "api"}}]
            )
        ),
        tools=[Tool(explode, requires_approval=True)],
    )
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "restart")
        await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)
        # The model hears that the tool failed (its words are its own); the thread gets them.
        assert h.texts(asked.ts) == ["the restart failed"]
