"""Agent-session turns on a store whose calls are slow and sometimes finish although they were
cancelled, as a Redis command does on Python 3.11 when the cancellation meets its reply inside
`asyncio.wait_for`: no turn hangs, no stop watcher outlives its turn, and a stop still stops a
turn whose first cancellation was lost (issue 19, "cancellation that cannot be lost")."""

from __future__ import annotations

import asyncio
import inspect
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import pytest

from bot import Agent, Tool
from bot.slack import SlackBot, load_settings
from bot.testing import FunctionModel
from state import Store, open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, CHANNEL

pytestmark = pytest.mark.slow

WATCHER = "handback-stop-watch"


class SlowStore:
    """A real store; each call first waits `delay` seconds (drawn between the two bounds: a
    store far away, or busy), and a cancellation that lands in that wait is swallowed with the
    odds `swallow`: the call is made and its result returned, and the task goes on as if it had
    not been cancelled. `only` names the calls slowed, when not all are."""

    def __init__(
        self,
        store: Store,
        *,
        seed: int,
        delay: tuple[float, float] = (0.05, 0.2),
        swallow: float = 0.5,
        only: frozenset[str] | None = None,
    ) -> None:
        self._store = store
        self._random = random.Random(seed)
        self._delay = delay
        self._swallow = swallow
        self._only = only
        self.swallowed = 0
        """Cancellations this store let through."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not inspect.iscoroutinefunction(attr) or (
            self._only is not None and name not in self._only
        ):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            try:
                await asyncio.sleep(self._random.uniform(*self._delay))
            except asyncio.CancelledError:
                if self._random.random() >= self._swallow:
                    raise
                self.swallowed += 1
            return await attr(*args, **kwargs)

        return call


@asynccontextmanager
async def _bot(
    slack: TestSlack, store_url: str, agent: Agent, **slow: Any
) -> AsyncIterator[tuple[SlackBot, SlowStore]]:
    slack.agent_refusal = None  # the app is an agent: turns are sessions with a stop button
    config = load_settings(
        slack_bot_token=slack.bot_token,
        slack_signing_secret=slack.signing_secret,
        slack_api_url=slack.api_url,
        handback_store=store_url,
    )
    async with open_store(store_url) as real:
        slowed = SlowStore(real, **slow)
        store = cast(Store, slowed)
        async with (
            SlackBot(agent=agent, store=store, settings=config, loops=False) as bot,
            bot.serve_http("127.0.0.1", 0) as url,
        ):
            slack.bot_url = url
            yield bot, slowed
            await bot.drain()


def _watchers() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == WATCHER and not t.done()]


INTERRUPTED = "was interrupted while it ran: it may or may not have taken effect."


async def test_a_hundred_turns_on_a_slow_store_neither_hang_nor_leave_a_watcher(
    slack: TestSlack, store_url: str
) -> None:
    """Ten threads, ten turns each, on a store whose every call takes 50-200 ms."""
    async with _bot(slack, store_url, agents.memory_agent, seed=19) as (bot, _):
        asked = await asyncio.gather(
            *(slack.post_user_message(ALICE, CHANNEL, f"thread {n} turn 0") for n in range(10))
        )
        for turn in range(10):
            if turn:
                await asyncio.gather(
                    *(
                        slack.post_user_message(
                            ALICE, CHANNEL, f"thread {n} turn {turn}", thread_ts=a.ts
                        )
                        for n, a in enumerate(asked)
                    )
                )
            async with asyncio.timeout(60):
                await bot.drain()
            assert _watchers() == []
            for n, a in enumerate(asked):
                replies = [m.text for m in slack.bot_messages(thread_ts=a.ts) if m.chunks]
                assert len(replies) == turn + 1, (n, replies)
                said = " | ".join(f"thread {n} turn {t}" for t in range(turn + 1))
                assert replies[-1] == f"I have heard: {said}"


async def test_a_stop_ends_a_turn_whose_cancellation_a_store_call_swallowed(
    slack: TestSlack, store_url: str
) -> None:
    """The turn's tool is always inside a store call, so the stop's cancellation lands in one,
    and one time in two the store lets it through: the stop cancels again until the run is
    stopping. Six stops in a row each end their turn."""
    started = asyncio.Event()
    stores: list[SlowStore] = []

    async def busy(service: str) -> str:
        """Work on a service, asking the store all along."""
        started.set()
        for _ in range(1000):  # 100 s at most
            await stores[0].load_run("run_busy_probe")
        return f"{service} done"

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "busy", "arguments": {"service": "api"}}]

    agent = Agent(name="busy", model=FunctionModel(script), tools=[Tool(busy)])
    async with _bot(slack, store_url, agent, seed=5) as (bot, slow):
        stores.append(slow)
        asked = await slack.post_user_message(ALICE, CHANNEL, "busy api")
        for turn in range(6):
            if turn:
                await slack.post_user_message(ALICE, CHANNEL, "busy api", thread_ts=asked.ts)
            async with asyncio.timeout(20):
                await started.wait()
            started.clear()
            assert (await slack.press_stop(ALICE, CHANNEL, asked.ts)).status == 200
            async with asyncio.timeout(20):
                await bot.drain()
            texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts)]
            assert texts[-1] == f"Stopped by <@{ALICE}>: `busy` {INTERRUPTED}", texts
            assert slack.sessions[(CHANNEL, asked.ts)].status == "active"
            assert _watchers() == []
        assert slow.swallowed > 0  # the store did lose cancellations


async def test_an_event_whose_inbox_write_ignores_its_deadline_is_refused_in_time(
    slack: TestSlack, store_url: str
) -> None:
    """The inbox write takes 4 s and does not heed the cancellation at its 2 s bound: the
    event still gets its 503 (Slack delivers it again) before Slack's 3 s are up."""
    slow = {"delay": (4.0, 4.0), "swallow": 1.0, "only": frozenset({"enqueue"})}
    async with _bot(slack, store_url, agents.memory_agent, seed=1, **slow) as (_, store):
        message = await slack.post_user_message(ALICE, CHANNEL, "hello", deliver=False)
        sent = time.monotonic()
        response = await slack.send_event(slack.events_for(message)[0])
        took = time.monotonic() - sent
        assert response.status == 503
        assert took < 2.8, f"answered after {took:.2f}s"
        assert store.swallowed == 1
