"""A running bot over real HTTP, a LocalSlack it talks to, and a store of each kind."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from blocks import ANYONE
from bot import Agent
from bot.slack import SlackBot, load_settings

# How long the app reuses a user group's member list: no setting moves it, so the clock does.
from bot.slack._policy import FRESH_WITHIN
from bot.testing import FunctionModel
from state import Store, open_store

from .._local_slack import ApiCall, Message, TestSlack
from . import agents

CHANNEL = "C0GENERAL"
ALICE = "U0ALICE"
BOB = "U0BOB"
CAROL = "U0CAROL"
DAVE = "U0DAVE"


@dataclass
class Clock:
    """Time the bot sees; tests move it forward instead of sleeping."""

    now: float = field(default_factory=time.time)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def pass_fresh_reads(self) -> None:
        """Move past what a user group's member list, once read, counts as fresh for: the
        next claim or resume reads it again."""
        self.advance(FRESH_WITHIN + 1)


DRAIN_MOST = 120.0
"""Seconds the harness waits for the bot to drain before it fails the test with why."""


@dataclass
class Harness:
    """One bot in this process, its LocalSlack and store. `mention`, `reply` and `click` drain
    the bot (run its inbox and the work it started until nothing is left) before returning.

    A turn that waits for a click never drains: a server's question asked during the call
    (older MCP protocol) holds the turn until it is answered. Start such a turn with `asking`
    (it returns once the card is posted, the turn still open), then `click`: the click's work
    starts at once (the bot kicks its worker for each item it records), the answer reaches
    the waiting call, and the drain ends with the turn. A drain that does not end within
    `DRAIN_MOST` fails the test saying so instead of hanging."""

    slack: TestSlack
    bot: SlackBot
    store: Store
    clock: Clock

    async def drain(self) -> None:
        try:
            async with asyncio.timeout(DRAIN_MOST):
                await self.bot.drain()
        except TimeoutError:
            raise AssertionError(
                f"the bot did not drain within {DRAIN_MOST}s: is a turn waiting for a click "
                "(a question asked during a call)? Start it with `Harness.asking`, then click"
            ) from None

    async def mention(self, user: str, text: str, *, channel: str = CHANNEL) -> Message:
        message = await self.slack.post_user_message(user, channel, text)
        await self.drain()
        return message

    async def asking(
        self, user: str, text: str, *, channel: str = CHANNEL, seconds: float = 30.0
    ) -> tuple[Message, Message]:
        """Mention the bot for a turn that waits for a click (a question asked during a
        call): returns the mention and the card, once it is in the thread, without draining
        (the turn is still open; a `click` on the card drains it)."""
        message = await self.slack.post_user_message(user, channel, text)
        # The turn runs in a task the post started (the kicked worker): its card comes later.
        await self.slack.wait_for(lambda: self.cards(message.ts), timeout=seconds)
        return message, self.card(message.ts)

    async def reply(
        self, user: str, thread_ts: str, text: str, *, channel: str = CHANNEL, mention: bool = False
    ) -> Message:
        message = await self.slack.post_user_message(
            user, channel, text, thread_ts=thread_ts, mention=mention
        )
        await self.drain()
        return message

    def bot_replies(self, thread_ts: str) -> list[Message]:
        return [m for m in self.slack.bot_messages(thread_ts=thread_ts)]

    def cards(self, thread_ts: str) -> list[Message]:
        """Copies of the cards as they are now (LocalSlack updates its messages in place)."""
        return [copy.deepcopy(m) for m in self.bot_replies(thread_ts) if m.blocks]

    def card(self, thread_ts: str) -> Message:
        cards = self.cards(thread_ts)
        assert cards, f"no card in thread {thread_ts}: {self.bot_replies(thread_ts)}"
        return cards[-1]

    @staticmethod
    def interaction_id(card: Message) -> str:
        for block in card.blocks:
            block_id = str(block.get("block_id", ""))
            if block_id.startswith("hb|"):
                return block_id.split("|")[1]
        raise AssertionError(f"no interaction block in {card.blocks}")

    def texts(self, thread_ts: str) -> list[str]:
        return [m.text for m in self.bot_replies(thread_ts) if not m.blocks]

    async def click(self, user: str, ts: str, action_id: str, **kwargs: Any) -> int:
        response = await self.slack.click(user, ts, action_id, **kwargs)
        await self.drain()
        return response.status

    def ephemerals(self, user: str) -> list[str]:
        return [e.text for e in self.slack.ephemerals_for(user)]


BotFactory = Callable[..., AbstractAsyncContextManager[Harness]]


def calls_to(slack: TestSlack, method: str) -> list[ApiCall]:
    """The Web API calls the bot made to `method` that Slack answered (in order)."""
    return [call for call in slack.calls if call.method == method and call.status == 200]


def model_calls(agent: Agent) -> int:
    """How many times the agent's scripted model was called so far."""
    model = agent.model
    assert isinstance(model, FunctionModel)
    return model.calls


LEAKS = re.compile(
    r"Traceback \(most recent call last\)"
    r"|File \"[^\"]+\", line \d+"
    r"|<class '"
    r"|\b[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+\.[A-Z]\w*(Error|Exception)\b"
    r"|\b[A-Z]\w*(Error|Exception)(: |\()"
)
"""What gives internals away: a traceback, a source line, a class or an exception's name."""


def visible_text(slack: TestSlack) -> list[str]:
    """Everything people can read: messages (text and blocks), ephemerals and opened modals."""
    shown = [m.text + json.dumps(m.blocks) for m in slack.messages]
    shown += [e.text for e in slack.ephemerals]
    shown += [json.dumps(v.view) for v in slack.views.values()]
    return shown


def assert_no_leaks(slack: TestSlack) -> None:
    leaks = [text for text in visible_text(slack) if LEAKS.search(text)]
    assert leaks == [], f"Slack shows internals: {leaks}"


@pytest.fixture
def nothing_leaks(slack: TestSlack) -> Iterator[None]:
    """Ends the test by checking that nothing a person can see in Slack carries a traceback or
    an exception's class path (`pytest.mark.usefixtures("nothing_leaks")`)."""
    yield
    assert_no_leaks(slack)


@pytest.fixture(autouse=True)
def _fresh_deploys() -> Iterator[None]:
    """Every test starts and ends with an empty log of what the pretend `deploy` tool did
    (`agents.DEPLOYS` is one list for the whole session)."""
    agents.DEPLOYS.clear()
    yield
    agents.DEPLOYS.clear()


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with TestSlack() as local:
        yield local


@pytest.fixture
def make_bot(slack: TestSlack, store_url: str) -> BotFactory:
    """`async with make_bot(agent, HANDBACK_APPROVERS=...) as h:` a bot on this test's store."""

    @asynccontextmanager
    async def factory(agent: Agent, **settings: Any) -> AsyncIterator[Harness]:
        config = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=store_url,
            # Gates are shut without a rule; tests about something else open them explicitly.
            **{
                "handback_approvers": ANYONE,
                **{key.lower(): value for key, value in settings.items()},
            },
        )
        clock = Clock()
        async with (
            open_store(store_url) as store,
            SlackBot(agent=agent, store=store, settings=config, clock=clock, loops=False) as bot,
            bot.serve_http("127.0.0.1", 0) as url,
        ):
            slack.bot_url = url
            await bot.drain()
            yield Harness(slack=slack, bot=bot, store=store, clock=clock)
            await bot.drain()

    # The root conftest's `redis_store_url` deletes this test's Redis keys afterwards.
    return factory
