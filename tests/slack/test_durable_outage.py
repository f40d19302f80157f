"""Redis stops while the bot runs (issue 8): Slack hears so in time, people are told, and what
was taken before the outage finishes once Redis is back, without restarting the bot.

Each test runs its own `redis-server` on a free port, without persistence of its own. Stopping
it snapshots first (`SAVE`) and then kills it, so the restart on the same port brings back
what was written up to the outage: a Redis that forgets everything would take the inbox with
it, which no bot can recover from.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from blocks import ACTION_APPROVE

from .._local_slack import ChangeKind, TestSlack
from ..conftest import IN_CI
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
    poll,
    sorry,
)
from .processes import Fleet, HookedSlack, free_port

pytestmark = pytest.mark.slow

SLACK_DEADLINE = 3.0
"""Seconds Slack waits for an answer to a request."""


class RedisServer:
    """A `redis-server` on 127.0.0.1:`port` keeping its snapshot in `root`."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.process: asyncio.subprocess.Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.root),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        client = aioredis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        try:
            deadline = time.monotonic() + 10
            while True:
                with contextlib.suppress(aioredis.ConnectionError, OSError):
                    if await client.ping():
                        return
                if time.monotonic() > deadline or self.process.returncode is not None:
                    raise AssertionError(f"redis-server did not start on port {self.port}")
                await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    async def stop(self) -> None:
        """Snapshot what it holds, then SIGKILL it: connections drop mid-flight."""
        client = aioredis.Redis.from_url(self.url)
        try:
            await client.save()
        finally:
            await client.aclose()
        await self.kill()

    async def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
            await self.process.wait()


@pytest.fixture
async def redis_server(tmp_path: Path) -> AsyncIterator[RedisServer]:
    if shutil.which("redis-server") is None:
        if IN_CI:
            pytest.fail("redis-server is not installed and CI is set")
        pytest.skip("redis-server is not installed")
    root = tmp_path / "redis"
    root.mkdir()
    server = RedisServer(root, free_port())
    try:
        await server.start()
        yield server
    finally:
        await server.kill()


@pytest.fixture
def marks(tmp_path: Path) -> Marks:
    return Marks.make(tmp_path)


async def test_a_mention_while_redis_is_down_is_refused_in_time(
    redis_server: RedisServer, marks: Marks
) -> None:
    """Slack gets a non-2xx within its 3 s, so it delivers the event again; the redelivery,
    once Redis is back, is answered."""
    async with (
        TestSlack() as slack,
        Fleet(slack, redis_server.url, ref=AGENT, env={**QUICK, **marks.env}) as fleet,
    ):
        await fleet.start("all")
        hello = await slack.post_user_message(ALICE, CHANNEL, "hello")
        assert await answer_in(slack, hello.ts) == ["I have heard: hello"]

        await redis_server.stop()
        asked = await slack.post_user_message(ALICE, CHANNEL, "lookup api", deliver=False)
        mention = slack.events_for(asked)[0]
        assert mention["type"] == "app_mention"
        event_id = slack.new_event_id()
        began = time.monotonic()
        async with asyncio.timeout(SLACK_DEADLINE):
            refused = await slack.send_event(mention, event_id=event_id)
        assert not 200 <= refused.status < 300, refused
        assert time.monotonic() - began < SLACK_DEADLINE

        await redis_server.start()
        # Slack retries an event 3 times; the first retry once Redis is back must be taken
        # (test_requests_right_after_redis_is_back_are_taken covers many at once).
        redelivered = await slack.send_event(mention, event_id=event_id, retry_num=1)
        assert redelivered.status == 200
        assert await answer_in(slack, asked.ts) == ["Tool said: api runs 2.3"]
        await fleet.live[0].wait_idle()
        assert marks.count("lookup") == 1
        assert sorry(slack) == []


async def test_a_click_while_redis_is_down_is_acked_and_the_person_told(
    redis_server: RedisServer, marks: Marks
) -> None:
    """The click is acked within 3 s and the person gets the "could not record" message;
    clicking again once Redis is back deploys, once."""
    async with (
        TestSlack() as slack,
        Fleet(slack, redis_server.url, ref=AGENT, env={**QUICK, **marks.env}) as fleet,
    ):
        await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await fleet.live[0].wait_idle()

        await redis_server.stop()
        began = time.monotonic()
        async with asyncio.timeout(SLACK_DEADLINE):
            clicked = await slack.click(BOB, card.ts, ACTION_APPROVE)
        assert time.monotonic() - began < SLACK_DEADLINE
        assert clicked.status == 200
        told = await poll(
            lambda: [e.text for e in slack.ephemerals_for(BOB) if "could not record" in e.text],
            timeout=10,
            what="the could-not-record message",
        )
        assert told == [
            "Sorry, I could not record that just now, so nothing happened. "
            "Please try again in a moment."
        ]
        assert marks.count("deploy") == 0

        await redis_server.start()
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, asked.ts) == ["Tool said: deployed api to prod"]
        await fleet.live[0].wait_idle()
        assert marks.count("deploy") == 1
        assert [m.text for m in slack.bot_messages() if "Sorry" in m.text] == []


async def test_work_taken_before_redis_stopped_finishes_once_it_is_back(
    redis_server: RedisServer, marks: Marks
) -> None:
    """A slow tool is running when Redis stops, and finishes during the outage; once Redis is
    back the turn ends with an answer in the thread, the tool having run once, with no
    restart of the bot."""
    async with (
        TestSlack() as slack,
        Fleet(slack, redis_server.url, ref=AGENT, env={**QUICK, **marks.env}) as fleet,
    ):
        [bot] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "slow api")
        await poll(lambda: marks.count("slow") == 1, timeout=20, what="the slow call starting")

        await redis_server.stop()
        marks.release()
        await poll(lambda: marks.count("slow") == 2, timeout=10, what="the slow call ending")
        # The bot meets the outage: writing the call's result fails, the work item waits.
        await bot.wait_for_log("waits for the store")
        assert answers(slack, asked.ts) == []
        await redis_server.start()

        [reply] = await answer_in(slack, asked.ts, timeout=30)
        await bot.wait_idle()
        assert bot.alive
        assert reply in {"Tool said: restarted api", f"Tool said: {INTERRUPTED}"}
        assert [line.split()[1] for line in marks.lines("slow")] == ["start", "end"]
        assert answers(slack, asked.ts) == [reply]
        assert sorry(slack) == []


async def test_requests_right_after_redis_is_back_are_taken(
    redis_server: RedisServer, marks: Marks
) -> None:
    """Once Redis answers again, the bot's next requests are recorded: connections the outage
    broke must not each cost a person a refused request."""
    async with (
        TestSlack() as slack,
        Fleet(slack, redis_server.url, ref=AGENT, env={**QUICK, **marks.env}) as fleet,
    ):
        [bot] = await fleet.start("all")
        # Some load first, so that the bot holds several connections to Redis.
        before = await asyncio.gather(
            *(slack.post_user_message(ALICE, CHANNEL, f"hello {n}") for n in range(20))
        )
        for message in before:
            await answer_in(slack, message.ts)
        await bot.wait_idle()

        await redis_server.stop()
        await redis_server.start()
        asked = [
            await slack.post_user_message(ALICE, CHANNEL, f"hi {n}", deliver=False)
            for n in range(20)
        ]
        delivered = await asyncio.gather(
            *(slack.send_event(slack.events_for(message)[0]) for message in asked)
        )
        statuses = [response.status for response in delivered]
        assert statuses == [200] * 20, f"{statuses.count(200)} of 20 taken: {bot.lines[-1]}"
        for message in asked:
            await answer_in(slack, message.ts)
        assert sorry(slack) == []


class _StopsRedisOnTheCardUpdate(HookedSlack):
    """Stops `server` the moment the bot's update of `card_ts` arrives, before answering it:
    the click is claimed, and the resume meets the outage."""

    def __init__(self, server: RedisServer) -> None:
        super().__init__()
        self.server = server
        self.card_ts: str | None = None
        self.stopped = asyncio.Event()

    async def publish(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        if kind == "call" and self.calls and not self.stopped.is_set():
            call = self.calls[-1]
            if call.method == "chat.update" and call.args.get("ts") == self.card_ts:
                await self.server.stop()
                self.stopped.set()
        await super().publish(kind, data)


@pytest.mark.parametrize("down_for", [3.0, 30.0])
async def test_redis_stopped_between_the_claim_and_the_resume(
    redis_server: RedisServer, marks: Marks, down_for: float
) -> None:
    """The click is claimed (answered, the run claimed for its resume), then Redis stops before
    the resume: once it is back the same bot resumes the run within 15 s, with default
    settings and no restart, the card shows the approval and the tool runs once."""
    slack = _StopsRedisOnTheCardUpdate(redis_server)
    async with slack, Fleet(slack, redis_server.url, ref=AGENT, env=marks.env) as fleet:
        [bot] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await bot.wait_idle()

        slack.card_ts = card.ts
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        await asyncio.wait_for(slack.stopped.wait(), timeout=20)
        await asyncio.sleep(down_for)
        assert marks.count("deploy") == 0
        await redis_server.start()
        back = time.monotonic()

        assert await answer_in(slack, asked.ts, timeout=15) == ["Tool said: deployed api to prod"]
        assert time.monotonic() - back < 15
        assert bot.alive
        await bot.wait_idle()
        assert approved_by(slack, card, BOB)
        assert marks.count("deploy") == 1
        assert sorry(slack) == []
