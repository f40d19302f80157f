"""A model call that fails says why, in one line, in the thread and in the log: the model's own
server (`OpenAICompatServer` over HTTP, with the real `openai` client) refuses the call."""

from __future__ import annotations

import logging

import pytest
from openai import AsyncOpenAI

from bot import Agent, OpenAIModel, Tool
from bot.testing import OpenAICompatServer

from .conftest import ALICE, BotFactory


def deploy(service: str) -> str:
    """Deploy a service."""
    return f"{service} deployed"


async def test_a_mistyped_model_says_why_in_one_line_in_the_thread_and_the_log(
    make_bot: BotFactory, caplog: pytest.LogCaptureFixture
) -> None:
    async with OpenAICompatServer(lambda messages: "hi", models=["gpt-4o-mini"]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        agent = Agent(
            name="typo",
            model=OpenAIModel("gpt-4o-mnii", client=client),
            tools=[Tool(deploy, requires_approval=True)],
        )
        with caplog.at_level(logging.INFO):
            async with make_bot(agent) as h:
                asked = await h.mention(ALICE, "deploy api")
                said = [m.text for m in h.bot_replies(asked.ts)]
        await client.close()
    why = (
        "the model call to `gpt-4o-mnii` failed: NotFoundError (HTTP 404): The model "
        "`gpt-4o-mnii` does not exist or you do not have access to it"
    )
    assert said[-1] == f"Sorry, that did not work out: {why}.", said
    assert "bot's log" not in said[-1] and "\n" not in said[-1]
    logged = [r for r in caplog.records if why in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in caplog.records]
    assert logged[0].exc_info is None  # one line, not the SDK's traceback
