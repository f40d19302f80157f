"""Redis round trips of one answered click, end to end: the click over real HTTP from TestSlack
to the bot, recorded in the inbox, taken, claimed, the run resumed and saved, the item done.

Counted on the wire: every command (or pipeline) the store's connections send is one round trip,
whatever method sent it, so a call added anywhere on the path fails the test.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import ClassVar

import redis
import redis.asyncio as aioredis

from blocks import ACTION_APPROVE, ACTION_CONFIRM
from bot import Agent
from bot.slack import SlackBot, load_settings
from state import RedisStore

# The store's client of the journal's marks, counted too (`counted_store`).
from state._redis_mark import MarkWriter

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL, BotFactory, calls_to

MOST_TRIPS = 8
"""The issue's bound (issue 19; 6 before it): from the click's arrival to the resumed run's
final save, inbox included."""

CLICK_TRIPS = 6
"""What a question click costs: the inbox write (which also reads the interaction clicked, into
the item, so the worker makes no read of it), the worker's `take`, the claim (with the thread's
lease), the save, the lease's release (which points the thread at the run) and the item's
`done`. Two more than before issue 19, which removed the inbox write's take for the worker and
the lease's release with `done`: machinery for round-trip counts only."""

MENTION_TRIPS = 11
"""What a new message that pauses on a question costs, from its arrival to its card: the inbox
write, the worker's `take` (one more than before issue 19), the thread's lease (with its stop
mark), the thread's run and its record (`get_thread_run`, `load_run`), the paused save, the
thread's pointer (`set_thread_run`, before the card, so a crash in between still finds the run),
the add of the interaction (which says whether its card exists or it was answered already, so
there is no read of it first), the card's ts, the lease's release and the item's `done`."""

STREAM_WRITES = 1
"""In an agent session the reply is streamed, and its message remembered (`set_run_stream`) as
soon as the stream starts, so that a retry after a crash stops it instead of streaming twice."""

JOURNAL_WRITES = 2
"""An approved tool with side effects is journaled before it runs and as it returns (the run
saved `running` twice), so that a crash never runs it again; a pure tool (a question) is not.
The first is not folded into `answer_and_claim`: the card is updated between the claim and the
handler's start, and a process killed there must leave the call to run once on the retry, not
reported interrupted (`test_kill_after_the_claim_before_the_card_shows_it`; docs/architecture.md,
"An answered click: five round trips")."""


class _CountingConnection(aioredis.Connection):
    """Records the command name of every request sent, except a new connection's handshake."""

    sent: ClassVar[list[bytes]]
    _handshake = False

    async def on_connect_check_health(self, check_health: bool = True) -> None:
        self._handshake = True
        try:
            await super().on_connect_check_health(check_health=check_health)
        finally:
            self._handshake = False

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        if not self._handshake:
            self.sent.append(_first_word(command))
        await super().send_packed_command(command, check_health=check_health)


class _CountingSyncConnection(redis.Connection):
    """`_CountingConnection` for the store's synchronous client of the journal's marks."""

    sent: ClassVar[list[bytes]]
    _handshake = False

    def on_connect_check_health(self, check_health: bool = True) -> None:
        self._handshake = True
        try:
            super().on_connect_check_health(check_health=check_health)
        finally:
            self._handshake = False

    def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        if not self._handshake:
            self.sent.append(_first_word(command))
        super().send_packed_command(command, check_health=check_health)


def _first_word(command: bytes | str | Iterable[bytes]) -> bytes:
    """The command name and, for EVALSHA, its digest, from a RESP request."""
    raw = command.encode() if isinstance(command, str) else command
    data = raw if isinstance(raw, bytes) else b"".join(raw)
    parts = data.split(b"\r\n")
    name = parts[2].upper()  # *<n>, $<len>, NAME, $<len>, arg, ...
    return name + b" " + parts[4] if name == b"EVALSHA" else name


@dataclass
class Trips:
    store: RedisStore
    sent: list[bytes]

    def breakdown(self) -> Counter[str]:
        names = {
            script.sha.encode(): attr.lstrip("_")
            for attr, script in vars(self.store).items()
            if hasattr(script, "sha")
        }
        counted: Counter[str] = Counter()
        for word in self.sent:
            name, _, sha = word.partition(b" ")
            counted[names.get(sha, sha.decode()) if sha else name.decode()] += 1
        return counted


@asynccontextmanager
async def counted_store(url: str) -> AsyncIterator[Trips]:
    base, _, prefix = url.partition("?prefix=")
    counting = type("Counting", (_CountingConnection,), {"sent": []})
    pool = aioredis.BlockingConnectionPool.from_url(base, connection_class=counting)
    client = aioredis.Redis.from_pool(pool)
    async with RedisStore(client, prefix=prefix, owns_client=True) as store:
        # The journal's started mark goes over a synchronous client of the store's own
        # (`state._redis_mark`): its round trips count too, on the same list.
        sync_counting = type("SyncCounting", (_CountingSyncConnection,), {"sent": counting.sent})

        def connect(timeout: float) -> redis.Redis:
            pool = redis.ConnectionPool.from_url(
                base, connection_class=sync_counting, socket_timeout=timeout
            )
            return redis.Redis(connection_pool=pool)

        store._marks = MarkWriter(connect)
        yield Trips(store=store, sent=counting.sent)


def _answered(slack: TestSlack, thread_ts: str) -> bool:
    return any(
        not m.blocks and m.text.startswith("Tool said:")
        for m in slack.bot_messages(thread_ts=thread_ts)
    )


def _carded(slack: TestSlack, thread_ts: str) -> bool:
    return any(m.blocks for m in slack.bot_messages(thread_ts=thread_ts))


Step = Callable[[TestSlack, SlackBot, Trips], Awaitable[str]]
"""What is counted: sent to the bot from TestSlack, and waited for until its reply is shown
(`trips.sent` cleared where counting starts); returns its thread's ts."""


async def _trips(url: str, slack: TestSlack, agent: Agent, step: Step) -> Counter[str]:
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_signing_secret=slack.signing_secret,
        slack_api_url=slack.api_url,
        handback_store=url,
        handback_approvers="anyone",
    )
    async with (
        counted_store(url) as trips,
        SlackBot(agent=agent, store=trips.store, settings=settings, loops=False) as bot,
        bot.serve_http("127.0.0.1", 0) as bot_url,
    ):
        slack.bot_url = bot_url
        counted: Counter[str] = Counter()
        # The first round loads every script into the server (NOSCRIPT, then SCRIPT LOAD): a
        # process does that once. The second is the one counted.
        for _ in range(2):
            thread_ts = await step(slack, bot, trips)
            deadline = time.monotonic() + 10
            # The worker has no "idle" event; `run_until_idle()` would take (a round trip).
            while bot.worker.busy and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.005)
            assert not bot.worker.busy
            counted = trips.breakdown()
            assert await trips.store.inbox_size() == 0
            assert await trips.store.get_thread_run(CHANNEL, thread_ts) is not None
        return counted


async def _click_trips(url: str, slack: TestSlack, agent: Agent, action: str) -> Counter[str]:
    async def click(slack: TestSlack, bot: SlackBot, trips: Trips) -> str:
        asked = await slack.post_user_message(ALICE, CHANNEL, "go")
        await bot.drain()
        card = next(m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks)
        trips.sent.clear()
        response = await slack.click(BOB, card.ts, action)
        assert response.status == 200
        # The inbox write took the item for the worker; wait for the answer and its `done`.
        await slack.wait_for(lambda: _answered(slack, asked.ts))
        return asked.ts

    counted = await _trips(url, slack, agent, click)
    print(f"\nRedis round trips of one answered click ({agent.name}): {dict(counted)}")
    return counted


async def _mention_trips(url: str, slack: TestSlack, agent: Agent) -> Counter[str]:
    async def mention(slack: TestSlack, bot: SlackBot, trips: Trips) -> str:
        trips.sent.clear()
        asked = await slack.post_user_message(ALICE, CHANNEL, "go")
        await slack.wait_for(lambda: _carded(slack, asked.ts))
        return asked.ts

    counted = await _trips(url, slack, agent, mention)
    print(f"\nRedis round trips of one mention ({agent.name}): {dict(counted)}")
    return counted


async def test_an_answered_question_costs_six_round_trips(
    redis_store_url: str, slack: TestSlack
) -> None:
    counted = await _click_trips(redis_store_url, slack, agents.confirm_agent, ACTION_CONFIRM)
    assert sum(counted.values()) == CLICK_TRIPS <= MOST_TRIPS, counted
    # Each store step once: enqueue (with the read), take, claim (with audit, run and lease),
    # save, release (with the thread's run), done; no read of the interaction.
    assert counted["answer_and_claim"] == counted["take_script"] == 1, counted
    assert counted["enqueue_script"] == counted["done_script"] == 1, counted
    assert counted["release_thread"] == 1, counted
    assert counted["XREADGROUP"] == counted["HMGET"] == counted["SET"] == 0, counted


async def test_an_approval_costs_eight_round_trips_with_its_tool_journal(
    redis_store_url: str, slack: TestSlack
) -> None:
    counted = await _click_trips(redis_store_url, slack, agents.approval_agent, ACTION_APPROVE)
    assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}] * 2
    # A layout-2 save is the `save_appended` script (a layout-1 fallback would be `save_run`).
    assert counted["save_run"] + counted["save_appended"] == 1 + JOURNAL_WRITES, counted
    assert sum(counted.values()) == CLICK_TRIPS + JOURNAL_WRITES <= MOST_TRIPS, counted
    assert counted["XREADGROUP"] == counted["HMGET"] == 0, counted


async def test_an_answer_the_runtime_refuses_on_the_short_path_cancels_the_run(
    make_bot: BotFactory,
) -> None:
    """The run claimed with the answer, then refused by the runtime (its own copy of the schema
    says no): the same child cancels it, and the thread and its lease move on."""
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        paused_id = await h.store.get_thread_run(CHANNEL, asked.ts)
        assert paused_id is not None
        paused = await h.store.load_run(paused_id)
        assert paused is not None and paused.interactions
        # The card still takes the click; the runtime's copy accepts nothing.
        paused.interactions[0].response_schema = {"not": {}}
        await h.store.save_run(paused)

        # Well within the thread lease's TTL: the cancelling turn takes the lease the first one
        # kept as the same owner, instead of waiting for it to expire.
        async with asyncio.timeout(10):
            assert await h.click(BOB, card.ts, ACTION_CONFIRM) == 200

        assert h.texts(asked.ts)[-1] == "Stopped (the answer given could not be used)."
        child_id = await h.store.get_thread_run(CHANNEL, asked.ts)
        assert child_id not in (None, paused_id)
        child = await h.store.load_run(child_id or "")
        assert child is not None and child.parent_id == paused_id
        assert (child.status, child.reason) == ("cancelled", "cancelled")
        assert await h.store.acquire_thread(CHANNEL, asked.ts, owner="next", ttl=30)


async def test_an_agent_session_click_costs_what_a_classic_one_does_besides_its_stream(
    redis_store_url: str, slack: TestSlack
) -> None:
    """With the app declared an agent, the resumed turn starts from the thread's stop mark read
    with the claim (no read of its own); all it adds is the write that keeps its stream."""
    classic = await _click_trips(redis_store_url, slack, agents.confirm_agent, ACTION_CONFIRM)
    async with TestSlack(agent_view=True) as agent_slack:
        agent = await _click_trips(
            redis_store_url, agent_slack, agents.confirm_agent, ACTION_CONFIRM
        )
        statuses = [c.args["status"] for c in calls_to(agent_slack, "agents.sessions.setStatus")]
    # Two rounds of a new turn and its resume, each an agent session.
    assert statuses == ["processing"] * 4
    assert agent - classic == Counter({"SET": STREAM_WRITES}), (agent, classic)
    assert not classic - agent, (agent, classic)
    assert sum(agent.values()) == CLICK_TRIPS + STREAM_WRITES, agent
    assert agent["HMGET"] == 0, agent


async def test_a_mention_that_pauses_on_a_question_costs_eleven_round_trips(
    redis_store_url: str, slack: TestSlack
) -> None:
    counted = await _mention_trips(redis_store_url, slack, agents.confirm_agent)
    assert sum(counted.values()) == MENTION_TRIPS, counted
    # The add returns each interaction as stored: no read of it before (`HMGET`).
    assert counted["add"] == counted["set_message"] == 1, counted
    assert counted["HMGET"] == 0, counted


async def test_an_agent_session_mention_costs_what_a_classic_one_does_besides_its_stream(
    redis_store_url: str, slack: TestSlack
) -> None:
    """A new message's turn reads the stop mark with its first take of the thread's lease."""
    classic = await _mention_trips(redis_store_url, slack, agents.confirm_agent)
    async with TestSlack(agent_view=True) as agent_slack:
        agent = await _mention_trips(redis_store_url, agent_slack, agents.confirm_agent)
        statuses = [c.args["status"] for c in calls_to(agent_slack, "agents.sessions.setStatus")]
    assert statuses == ["processing"] * 2  # two rounds, each an agent session
    assert agent - classic == Counter({"SET": STREAM_WRITES}), (agent, classic)
    assert not classic - agent, (agent, classic)
