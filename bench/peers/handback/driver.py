"""handback's contenders, driven like the peers (run with the project's .venv).

    .venv/bin/python bench/peers/handback/driver.py --contender sqlite --measure cycle --n 200

Contenders: `sqlite` (a file, WAL, `synchronous=NORMAL`, the store's default), `sqlite-full`
(the same store opened with `?synchronous=full`) and `redis` (the server at `--redis`, under a
throwaway prefix deleted afterwards). Only public APIs: `bot.Agent`,
`bot.testing.FunctionModel`, `bot.slack.SlackBot`, `state.open_store`, and `LocalSlack` as the
stand-in for Slack. `$HANDBACK_BENCH_CODE` names the directory to import handback from
(default: this checkout).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# compare.py points this at a copy of bot/, state/ and blocks/ taken when the run began, so every
# round measures the same code while the working tree changes.
sys.path.insert(
    0, os.environ.get("HANDBACK_BENCH_CODE") or str(Path(__file__).resolve().parents[3])
)

import redis.asyncio as aioredis
from _click import BURST_CONNECTIONS, SignedPoster
from _driver import (
    ANSWER,
    FINAL,
    HISTORY_REPLY,
    PROMPT,
    QUESTION,
    arguments,
    check_cycle,
    check_fresh,
    emit,
    history_prompt,
    is_history_prompt,
    saw_prompt,
    sqlite_payload_bytes,
    throughput,
    timed,
)

from blocks import ACTION_OPTION
from bot import Agent
from bot.events import InteractionEvent
from bot.playground._slack import LocalSlack
from bot.slack import Role, SlackBot, load_settings
from bot.slack._heap import freeze_startup_heap  # the CLI's own step, private to it
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import Store, open_store

CONTENDERS = ("sqlite", "sqlite-full", "redis", "sqlite-web", "redis-web")
"""`-web`: the click measure against a bot with `role="web"` (verify, record, ack), its work
done by a second bot with `role="worker"` in the same process after each batch, untimed."""

PERSISTS = {
    "sqlite": "run records, transcripts appended once per thread, in an SQLite file, WAL, "
    "synchronous=NORMAL",
    "sqlite-full": "the same, with synchronous=FULL (`?synchronous=full`)",
    "redis": "run records as Redis hashes (this server: no AOF, no RDB snapshots)",
}


def script(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return "using " + last["content"]
    if is_history_prompt(last["content"]):
        return HISTORY_REPLY
    assert last["content"] == PROMPT, last
    saw_prompt(sum(m["role"] != "system" for m in messages))
    return [{"name": "ask_user", "arguments": QUESTION}]


class Contender:
    """One store under test, and the agent on it."""

    def __init__(self, name: str, redis_url: str) -> None:
        self.name = name
        self.redis_url = redis_url
        self.prefix = f"hbcompare-{uuid.uuid4().hex[:10]}:"
        self.tmp = tempfile.mkdtemp(prefix="hbcompare-")
        self.files = 0

    def url(self) -> str:
        """A fresh, empty store each call."""
        self.files += 1
        if self.name == "redis":
            return f"{self.redis_url}?prefix={self.prefix}{self.files}:&client_name=hbcompare"
        path = f"sqlite:///{Path(self.tmp) / f'store{self.files}.db'}"
        return f"{path}?synchronous=full" if self.name == "sqlite-full" else path

    @asynccontextmanager
    async def store(self) -> AsyncIterator[tuple[Store, str]]:
        url = self.url()
        async with open_store(url) as store:
            yield store, url

    async def cleanup(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.name != "redis":
            return
        client = aioredis.Redis.from_url(self.redis_url)
        try:
            keys = [key async for key in client.scan_iter(match=f"{self.prefix}*", count=1000)]
            for start in range(0, len(keys), 500):
                await client.delete(*keys[start : start + 500])
        finally:
            await client.aclose()


def new_agent(store: Store) -> tuple[Agent, FunctionModel]:
    model = FunctionModel(script)
    return Agent(name="bench", model=model, tools=[ask_user], store=store), model


async def ask(agent: Agent, parent: str | None) -> tuple[list[InteractionEvent], str]:
    events = [event async for event in agent(prompt=PROMPT, parent_id=parent)]
    questions = [event for event in events if isinstance(event, InteractionEvent)]
    return questions, events[-1].run_id


async def answer(agent: Agent, paused: str, questions: list[InteractionEvent]) -> str:
    done = await agent(parent_id=paused, resume={questions[0].interaction_id: ANSWER}).collect()
    return str(done.output)


async def cycle(agent: Agent, parent: str | None = None) -> None:
    questions, paused = await ask(agent, parent)
    if await answer(agent, paused, questions) != FINAL:
        raise AssertionError("a timed cycle did not end with the final answer")


async def check(
    agent: Agent, model: FunctionModel, parent: str | None = None, earlier: int = 0
) -> float:
    """One cycle checked for the agreed work (in a new conversation, or continuing `parent`,
    a thread of `earlier` messages); the store calls it made."""
    store = agent.store
    assert store is not None
    counting = CountingStore(store)
    agent.store = counting  # type: ignore[assignment]
    try:
        before = model.calls
        questions, paused = await ask(agent, parent)
        output = await answer(agent, paused, questions)
    finally:
        agent.store = store
    check_cycle(
        questions=len(questions),
        answers=1,
        output=output,
        model_calls=model.calls - before,
        earlier=earlier,
    )
    assert questions[0].payload == QUESTION, questions[0].payload
    return float(sum(counting.calls.values()))


async def thread(agent: Agent, messages: int) -> str | None:
    """A conversation of `messages` earlier messages; the id of its last run."""
    last = None
    for i in range(messages // 2):
        done = await agent(prompt=history_prompt(i), parent_id=last).collect()
        assert done.output == HISTORY_REPLY, done
        last = done.run_id
    return last


# ------------------------------------------------------------------ in-process measures


async def measure_cycle(c: Contender, n: int, budget: float) -> dict[str, Any]:
    async with c.store() as (store, _):
        agent, model = new_agent(store)
        calls = await check(agent, model)
        samples = await timed(n, lambda _: cycle(agent), budget=budget)
        return {"samples": samples, "store_calls": calls}


async def measure_resume(c: Contender, n: int, sizes: list[int], budget: float) -> dict[str, Any]:
    """Per thread size: the thread is built once; each sample asks in it (untimed) and times
    the resume alone."""
    samples = {}
    for size in sizes:
        async with c.store() as (store, _):
            agent, model = new_agent(store)
            base = await thread(agent, size)
            await check(agent, model, base, earlier=size)

            async def asked(_: int, base: str | None = base, agent: Agent = agent) -> Any:
                return agent, await ask(agent, base)

            samples[str(size)] = await timed(
                n, resumed, budget=budget / len(sizes), prepare=asked, warmup=5, earlier=size
            )
    return {"samples": samples}


async def resumed(asked: Any) -> None:
    agent, (questions, paused) = asked
    if await answer(agent, paused, questions) != FINAL:
        raise AssertionError("a timed resume did not end with the final answer")


async def measure_throughput(c: Contender, n: int, concurrency: int) -> dict[str, Any]:
    async with c.store() as (store, _):
        agent, model = new_agent(store)
        await check(agent, model)
        return {"value": await throughput(concurrency, n, lambda _: cycle(agent))}


async def stored_bytes(c: Contender, store: Store, url: str) -> dict[str, int]:
    """Payload bytes of everything in the store (SQLite: every value; Redis: every value and
    field name, plus `MEMORY USAGE`)."""
    if c.name != "redis":
        path = url.removeprefix("sqlite:///")
        tables = sqlite_payload_bytes(path)
        kept = {f"table:{k}": v for k, v in tables.items() if v}
        return {"payload": sum(tables.values()), **kept}
    prefix = url.split("prefix=", 1)[1].split("&", 1)[0]
    client = aioredis.Redis.from_url(c.redis_url)
    payload = memory = 0
    try:
        async for key in client.scan_iter(match=f"{prefix}*", count=1000):
            memory += int(await client.memory_usage(key, samples=0) or 0)
            kind = (await client.type(key)).decode()
            if kind == "string":
                payload += int(await client.strlen(key))
            elif kind == "hash":
                items = await client.hgetall(key)
                payload += sum(len(k) + len(v) for k, v in items.items())
            elif kind == "zset":
                members = await client.zrange(key, 0, -1)
                payload += sum(len(m) + 8 for m in members)
            elif kind == "list":
                payload += sum(len(v) for v in await client.lrange(key, 0, -1))
            elif kind == "stream":
                for _, fields in await client.xrange(key):
                    payload += sum(len(k) + len(v) for k, v in fields.items())
            else:
                payload += len(await client.dump(key) or b"")
    finally:
        await client.aclose()
    return {"payload": payload, "redis_memory_usage": memory}


async def measure_bytes(c: Contender) -> dict[str, Any]:
    result: dict[str, Any] = {}
    async with c.store() as (store, url):
        empty = await stored_bytes(c, store, url)
        agent, _ = new_agent(store)
        await ask(agent, None)
        check_fresh()
        result["pending"] = delta(await stored_bytes(c, store, url), empty)
    for messages in (2, 20, 200):
        async with c.store() as (store, url):
            empty = await stored_bytes(c, store, url)
            agent, _ = new_agent(store)
            await thread(agent, messages)
            result[f"thread_{messages}"] = delta(await stored_bytes(c, store, url), empty)
    result["pending_slack"] = await slack_pending_bytes(c)
    return {"bytes": result}


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items()}


# ---------------------------------------------------------------------- the Slack path


class CountingStore:
    """The store with every call counted by method name (one call is one round trip on Redis;
    on SQLite one job on the store's thread). A `take` that found nothing is counted apart:
    with `loops=False`, `drain()` makes such takes to learn that the inbox is idle, where a
    running worker waits in one blocking take instead."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not inspect.iscoroutinefunction(attr) or name.startswith("_"):
            return attr

        async def counted(*args: Any, **kwargs: Any) -> Any:
            result = await attr(*args, **kwargs)
            empty = name == "take" and not result
            self.calls["take (found nothing)" if empty else name] += 1
            return result

        return counted


@dataclass
class Bots:
    """LocalSlack and the bot it delivers to (`web`); `worker` does the work (the same bot
    unless the web side runs alone, as `handback run --role web` would)."""

    slack: LocalSlack
    web: SlackBot
    worker: SlackBot
    model: FunctionModel

    async def drain(self) -> None:
        await self.worker.drain()
        await self.web.drain()


@asynccontextmanager
async def slack_bots(store: Any, url: str, *, web_only: bool = False) -> AsyncIterator[Bots]:
    model = FunctionModel(script)
    agent = Agent(name="bench", model=model, tools=[ask_user])
    async with LocalSlack() as slack:
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=url,
        )
        role: Role = "web" if web_only else "all"
        async with AsyncExitStack() as stack:
            web = await stack.enter_async_context(
                SlackBot(agent=agent, store=store, settings=settings, loops=False, role=role)
            )
            worker = web
            if web_only:
                worker = await stack.enter_async_context(
                    SlackBot(
                        agent=agent, store=store, settings=settings, loops=False, role="worker"
                    )
                )
            slack.bot_url = await stack.enter_async_context(web.serve_http("127.0.0.1", 0))
            freeze_startup_heap()  # as `handback run` does: `serve(freeze_heap=True)`
            bots = Bots(slack=slack, web=web, worker=worker, model=model)
            yield bots
            await bots.drain()


async def cards(bots: Bots, count: int) -> list[tuple[str, dict[str, Any]]]:
    """`count` people each ask in a new thread; once every card is up and the bots idle, the
    threads and the click each card will get."""
    slack = bots.slack
    asked = [await slack.post_user_message("U0ALICE", "C0GENERAL", PROMPT) for _ in range(count)]
    await bots.drain()
    found = []
    for message in asked:
        card = await slack.wait_for(
            lambda m=message: next(
                (b for b in slack.bot_messages(thread_ts=m.ts) if b.blocks), None
            )
        )
        payload = slack.block_actions_payload("U0ALICE", card.ts, f"{ACTION_OPTION}:0")
        found.append((message.ts, payload))
    await bots.drain()
    check_fresh(count)
    return found


def answered(slack: LocalSlack, thread_ts: str) -> bool:
    return any(m.text == FINAL for m in slack.bot_messages(thread_ts=thread_ts))


async def click_batch(
    bots: Bots, poster: SignedPoster, batch: list[tuple[str, dict[str, Any]]]
) -> tuple[list[float], list[float]]:
    """Every card clicked at once; per click, ms to the HTTP ack and to the answer posted
    (a web-only bot acks only: its answers come after the batch, from the worker, untimed).
    Fails unless each click was one answer and one final output, the model called twice per
    cycle."""
    slack = bots.slack
    bodies = [urlencode({"payload": json.dumps(payload)}) for _, payload in batch]
    web_only = bots.web is not bots.worker
    calls = bots.model.calls

    async def one(thread_ts: str, body: str) -> tuple[float, float]:
        start = time.perf_counter()
        status = await poster.post(body)
        acked = time.perf_counter()
        assert status == 200, status
        if web_only:
            return (acked - start) * 1000, 0.0
        await slack.wait_for(lambda: answered(slack, thread_ts), timeout=60)
        return (acked - start) * 1000, (time.perf_counter() - start) * 1000

    results = await asyncio.gather(
        *(one(ts, body) for (ts, _), body in zip(batch, bodies, strict=True))
    )
    await bots.drain()
    finals = [sum(m.text == FINAL for m in slack.bot_messages(thread_ts=ts)) for ts, _ in batch]
    assert finals == [1] * len(batch), finals
    assert bots.model.calls - calls == len(batch), "one model call per resume"
    return [r[0] for r in results], [r[1] for r in results]


async def measure_click(c: Contender, n: int, concurrency: int, web_only: bool) -> dict[str, Any]:
    acks: list[float] = []
    answers: list[float] = []
    async with c.store() as (store, url), slack_bots(store, url, web_only=web_only) as bots:
        poster = SignedPoster(bots.slack.bot_url or "", bots.slack.signing_secret)
        async with poster:
            calls = bots.model.calls
            warm = await cards(bots, min(concurrency, 10))
            assert bots.model.calls - calls == len(warm), "one model call per question"
            await click_batch(bots, poster, warm)
            # A running process has as many store connections open as it has had calls in flight;
            # a fresh one would open them during the first timed burst instead.
            await asyncio.gather(*(store.inbox_size() for _ in range(concurrency)))
            while len(acks) < n:
                batch = await cards(bots, concurrency)
                ack_ms, answer_ms = await click_batch(bots, poster, batch)
                acks += ack_ms
                answers += answer_ms
    if web_only:
        does = "records it in the store's inbox, acks; another bot does the work"
        return {"samples": {"ack": acks}, "does": does}
    does = "records it in the store's inbox, acks, then resumes the run in the same process"
    return {"samples": {"ack": acks, "answer": answers}, "does": does}


NOT_RECORDED = "could not record that"
"""In the notice a person gets when the bot acked a click it could not record (the store did not
take it in time): it asks them to click again."""

BURST_CLICK_ROUNDS = 3
"""How often a person told "could not record" clicks again before the measure fails."""

SETTLE_S = 180.0
"""Seconds a round of the burst may take to answer or refuse every click."""


async def measure_burst(c: Contender, size: int) -> dict[str, Any]:
    """`size` cards, then every one clicked at once on one process (the bot, LocalSlack and
    the clicking clients share its event loop), over `BURST_CONNECTIONS` connections; ms to
    each HTTP ack. A click the bot acked but
    could not record is clicked again, as its notice asks, up to `BURST_CLICK_ROUNDS` times; how
    many were, and how many never were, is part of the result (each thread answered once)."""
    async with c.store() as (store, url), slack_bots(store, url) as bots:
        slack = bots.slack
        poster = SignedPoster(
            slack.bot_url or "", slack.signing_secret, connections=BURST_CONNECTIONS
        )
        async with poster:
            await click_batch(bots, poster, await cards(bots, 10))
            batch = await cards(bots, size)
            bodies = {ts: urlencode({"payload": json.dumps(payload)}) for ts, payload in batch}
            acks: list[float] = []
            again: list[int] = []
            waiting = list(bodies)
            began = time.perf_counter()
            for _ in range(BURST_CLICK_ROUNDS):
                told = sum(NOT_RECORDED in e.text for e in slack.ephemerals)
                times = await asyncio.gather(*(timed_post(poster, bodies[ts]) for ts in waiting))
                if not again:
                    acks = times
                await settle(bots, waiting, told)
                waiting = [ts for ts in waiting if not answered(slack, ts)]
                again.append(len(waiting))
                if not waiting:
                    break
            done = time.perf_counter() - began
    finals = Counter(m.thread_ts for m in slack.bot_messages() if m.text == FINAL)
    twice = sorted(finals[ts] for ts in bodies if finals[ts] > 1)
    assert not twice, f"{len(twice)} thread(s) got more than one final answer: {twice[:10]}"
    assert sum(finals[ts] for ts in bodies) == size - len(waiting)
    return {
        "samples": {"ack": acks},
        "not_recorded": again[:-1] if not waiting else again,
        "never_recorded": len(waiting),
        "all_answered_s": done,
        "does": "records each click in the store's inbox, acks, resumes the run in the same "
        "process",
    }


async def settle(bots: Bots, waiting: list[str], told: int) -> None:
    """Until each clicked thread has its answer or the click its "not recorded" notice, draining
    the bot (whose kicked work may leave items for a later take). Checked four times a second,
    not on every change: a check reads every message, and would load the loop it measures."""
    slack = bots.slack

    def count() -> tuple[int, int]:
        finals = {m.thread_ts for m in slack.bot_messages() if m.text == FINAL}
        notices = sum(NOT_RECORDED in e.text for e in slack.ephemerals) - told
        return sum(ts in finals for ts in waiting), notices

    deadline = time.perf_counter() + SETTLE_S
    while True:
        await bots.drain()
        if sum(count()) >= len(waiting):
            return
        if time.perf_counter() > deadline:
            got, notices = count()
            raise AssertionError(
                f"{len(waiting)} clicks: {got} answered and {notices} told 'not recorded' "
                f"after {SETTLE_S:.0f} s"
            )
        await asyncio.sleep(0.25)


async def timed_post(poster: SignedPoster, body: str) -> float:
    start = time.perf_counter()
    status = await poster.post(body)
    assert status == 200, status
    return (time.perf_counter() - start) * 1000


async def measure_trips(c: Contender, clicks: int) -> dict[str, Any]:
    """Store calls per answered click (both stores) and, on Redis, the commands the server saw
    from this process's connections (`MONITOR`), per click: from the click's HTTP request to
    its work item done, one click at a time (the ack kicks the worker, which takes the click in
    one `take`; no `drain()`, whose takes that find nothing would count too)."""
    async with c.store() as (real, url):
        store = CountingStore(real)
        async with slack_bots(store, url) as bots:
            poster = SignedPoster(bots.slack.bot_url or "", bots.slack.signing_secret)
            async with poster:
                batch = await cards(bots, clicks + 1)
                await one_click(bots, poster, batch.pop())  # the scripts loaded, once
                monitor = RedisMonitor(c.redis_url) if c.name == "redis" else None
                if monitor:
                    await monitor.start()
                store.calls.clear()
                for item in batch:
                    await one_click(bots, poster, item)
                calls = dict(store.calls)
                commands = await monitor.stop(url) if monitor else {}
    per = {name: count / clicks for name, count in sorted(calls.items())}
    result: dict[str, Any] = {"store_calls": per}
    if commands:
        result["redis_commands"] = {k: v / clicks for k, v in sorted(commands.items())}
    return {"counts": result}


async def one_click(bots: Bots, poster: SignedPoster, item: tuple[str, dict[str, Any]]) -> None:
    """One click, then wait for its answer in the thread and for the worker to finish it."""
    thread_ts, payload = item
    assert await poster.post(urlencode({"payload": json.dumps(payload)})) == 200
    await bots.slack.wait_for(lambda: answered(bots.slack, thread_ts), timeout=60)
    worker = bots.worker.worker
    async with asyncio.timeout(60):
        while worker.busy:  # noqa: ASYNC110 - the worker has no "idle" event
            await asyncio.sleep(0.002)


_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


class RedisMonitor:
    """`MONITOR` on a raw connection of its own, keeping only what this store's connections sent
    (found by their client name); EVALSHA is listed by the kind of its first key.

    Not redis-py's `monitor()`: its reader refuses lines over 64 KiB, and other clients of the
    same server (other test suites) send commands that long.
    """

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.lines: list[bytes] = []
        self.task: asyncio.Task[None] | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def start(self) -> None:
        parts = urlsplit(self.redis_url)
        reader, self.writer = await asyncio.open_connection(
            parts.hostname or "127.0.0.1", parts.port or 6379, limit=1 << 30
        )
        self.writer.write(b"MONITOR\r\n")
        await self.writer.drain()
        assert (await reader.readline()).startswith(b"+OK"), "MONITOR refused"

        async def listen() -> None:
            while line := await reader.readline():
                self.lines.append(line)

        self.task = asyncio.create_task(listen())

    async def stop(self, url: str) -> dict[str, int]:
        await asyncio.sleep(0.1)
        client = aioredis.Redis.from_url(self.redis_url)
        try:
            ours = {c["addr"] for c in await client.client_list() if c.get("name") == "hbcompare"}
        finally:
            await client.aclose()
        assert self.task is not None and self.writer is not None
        self.task.cancel()
        with suppress(asyncio.CancelledError):
            await self.task
        self.writer.close()
        prefix = url.split("prefix=", 1)[1].split("&", 1)[0]
        counts: Counter[str] = Counter()
        for raw in self.lines:
            # +<time> [<db> <addr>] "CMD" "arg" ...
            line = raw.decode("utf-8", "replace")
            inside = line[line.find("[") + 1 : line.find("]")].split()
            if len(inside) != 2 or inside[1] not in ours:
                continue
            words = _QUOTED.findall(line[line.find("]") + 1 :])
            if not words:
                continue
            name = words[0].upper()
            if name in {"EVALSHA", "EVAL"} and len(words) > 3 and words[2] != "0":
                key = words[3].removeprefix(prefix)
                name += " " + key.split(":", 1)[0].rstrip("{")
            counts[name] += 1
        return dict(counts)


async def slack_pending_bytes(c: Contender) -> dict[str, int]:
    """Everything the store holds while one card waits, after a mention (a whole bot's view)."""
    async with c.store() as (store, url):
        empty = await stored_bytes(c, store, url)
        async with slack_bots(store, url) as bots:
            await cards(bots, 1)
            return delta(await stored_bytes(c, store, url), empty)


async def main() -> None:
    args = arguments(CONTENDERS, __doc__ or "")
    web_only = args.contender.endswith("-web")
    c = Contender(args.contender.removesuffix("-web"), args.redis)
    try:
        if args.measure == "cycle":
            result = await measure_cycle(c, args.n, args.budget)
        elif args.measure == "resume":
            result = await measure_resume(c, args.n, args.sizes, args.budget)
        elif args.measure == "throughput":
            result = await measure_throughput(c, args.n, args.concurrency)
        elif args.measure == "bytes":
            result = await measure_bytes(c)
        elif args.measure == "click":
            if c.name == "sqlite-full":
                raise SystemExit("sqlite-full is measured in process only")
            result = await measure_click(c, args.n, args.concurrency, web_only=web_only)
        elif args.measure == "burst":
            if c.name == "sqlite-full" or web_only:
                raise SystemExit("the burst is measured on one process doing all the work")
            result = await measure_burst(c, args.n)
        else:
            result = await measure_trips(c, args.n)
    finally:
        await c.cleanup()
    emit(contender=f"handback {args.contender}", persists=PERSISTS[c.name], **result)


if __name__ == "__main__":
    asyncio.run(main())
