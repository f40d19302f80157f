"""A program that embeds the bot keeps what is its own: its garbage collector, and the store its
agent was given. An agent without a store says where its runs will go before it opens it."""

from __future__ import annotations

import gc
import logging
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot import Agent, UsageError
from bot.slack import SlackBot, load_settings
from bot.testing import FunctionModel
from state import open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, BotFactory


def _plain_agent() -> Agent:
    return Agent(name="plain", model=FunctionModel(lambda messages: "hi"))


async def test_serving_leaves_the_embedding_programs_garbage_collector_as_it_was(
    make_bot: BotFactory,
) -> None:
    frozen_before = gc.get_freeze_count()
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        assert await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE) == 200
        assert agents.DEPLOYS, "the served bot ran the approved tool"
        assert gc.get_freeze_count() == frozen_before
        assert gc.isenabled()
    assert gc.get_freeze_count() == frozen_before


async def test_an_agent_without_a_store_uses_the_apps_while_it_is_open(
    slack: TestSlack, store_url: str
) -> None:
    agent = _plain_agent()
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_signing_secret=slack.signing_secret,
        slack_api_url=slack.api_url,
        handback_store=store_url,
    )
    async with open_store(store_url) as store:
        async with SlackBot(agent=agent, store=store, settings=settings, loops=False):
            assert agent.store is store
        assert agent.store is None


async def test_an_app_refuses_an_agent_that_saves_its_runs_in_another_store(
    slack: TestSlack, store_url: str, tmp_path: Path
) -> None:
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_signing_secret=slack.signing_secret,
        slack_api_url=slack.api_url,
        handback_store=store_url,
    )
    async with (
        open_store(store_url) as store,
        open_store(f"sqlite:///{tmp_path}/agents-own.db") as own,
    ):
        agent = Agent(name="owned", model=FunctionModel(lambda messages: "hi"), store=own)
        with pytest.raises(UsageError, match="`owned` saves its runs in SQLiteStore"):
            SlackBot(agent=agent, store=store, settings=settings, loops=False)
        assert agent.store is own
        # The same store for both is no mismatch.
        async with SlackBot(agent=agent, store=own, settings=settings, loops=False):
            assert agent.store is own
        assert agent.store is own


def test_an_agent_without_a_store_names_where_its_runs_will_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HANDBACK_STORE", raising=False)
    assert "store=None (opens 'sqlite:///handback.db' on first use)" in repr(_plain_agent())
    monkeypatch.setenv("HANDBACK_STORE", "redis://:hunter2@redis.internal:6379/0")
    shown = repr(_plain_agent())
    assert "opens 'redis://:***@redis.internal:6379/0' on first use" in shown
    assert "hunter2" not in shown


async def test_an_agent_given_a_store_shows_it(sqlite_store_url: str) -> None:
    async with open_store(sqlite_store_url) as store:
        agent = Agent(name="given", model=FunctionModel(lambda messages: "hi"), store=store)
        assert repr(agent).endswith(f"store={store!r})")


async def test_an_agent_without_a_store_says_in_the_log_where_it_saves_its_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path}/first-use.db"
    monkeypatch.setenv("HANDBACK_STORE", url)
    agent = _plain_agent()
    with caplog.at_level(logging.INFO, logger="handback.agent"):
        result = await agent(prompt="hello").collect()
    await agent.aclose()
    assert result.output == "hi"
    assert f"agent plain: no store given, saving runs in {url}" in caplog.messages
