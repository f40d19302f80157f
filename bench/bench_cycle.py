"""One ask -> pause -> resume cycle with a scripted model, per store; prints ms per cycle.

    python bench/bench_cycle.py [--cycles 2000] [--redis redis://127.0.0.1:6379/0] [--split]

A cycle is: a new run whose model calls `ask_user`, the run pausing (saved), then a resume with
the answer (a reading claim of the paused run, the handler re-run, the final model turn,
saved). Durable on every store: nothing is kept in memory between the two calls.

`--split` also says where a cycle's time goes: each store call's time inside the cycle, the
framework's own work (the rest), and a bare round trip to the same store (Redis `PING` with
redis-py's asyncio client; for SQLite a `SELECT 1` through a one-thread executor, the hop its
store makes), and the same without that machinery (a RESP `PING` on an asyncio stream; the
`SELECT 1` on the loop's thread). `floor` is the framework's work plus one bare round trip per
store call: what a cycle would cost if each call cost no more than its round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sqlite3
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from _stores import REDIS_URL, per_call, percentiles, store_urls

from bot import Agent
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import open_store


def script(messages: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return [
            {
                "name": "ask_user",
                "arguments": {"question": "Which database?", "options": ["postgres", "mysql"]},
            }
        ]
    return "using " + messages[-1]["content"]


STORE_CALLS = ("claim_run", "load_run", "release_run", "save_run")


class Split:
    """Time spent in each of the store's run calls, and how often each was made."""

    def __init__(self, store: Any) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        for name in STORE_CALLS:
            setattr(store, name, self._timed(name, getattr(store, name)))

    def _timed(self, name: str, call: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start
                self.calls[name] += 1

        return timed

    def clear(self) -> None:
        self.seconds.clear()
        self.calls.clear()


async def bench(url: str, cycles: int, split: bool = False) -> tuple[list[float], Split | None]:
    """ms per cycle; with `split`, the store calls the timed cycles made."""
    async with open_store(url) as store:
        calls = Split(store) if split else None
        agent = Agent(name="bench", model=FunctionModel(script), tools=[ask_user], store=store)
        timings: list[float] = []
        for i in range(cycles + 50):
            start = time.perf_counter()
            events = [e async for e in agent(prompt="set up my database")]
            paused, interaction = events[-1], events[-2]
            done = await agent(
                parent_id=paused.run_id, resume={interaction.interaction_id: "postgres"}
            ).collect()  # type: ignore[union-attr]
            elapsed = time.perf_counter() - start
            assert done.output == "using postgres", done
            if i >= 50:  # warm-up: caches, connections, SQLite pages
                timings.append(elapsed * 1000)
            elif i == 49 and calls is not None:
                calls.clear()
        return timings, calls


async def round_trip(url: str, n: int = 3000) -> tuple[float, float]:
    """A bare round trip to the store at `url` in ms: through the kind of client the store uses,
    and without its machinery (SQLite: the same `SELECT 1` on the loop's thread; Redis: a RESP
    `PING` written and read on an asyncio stream)."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(urlsplit(url).path, check_same_thread=False)
        loop = asyncio.get_running_loop()

        def select() -> None:
            conn.execute("SELECT 1").fetchone()

        async def direct(_: int) -> None:
            select()

        try:
            with ThreadPoolExecutor(max_workers=1) as executor:
                hop = await per_call(n, lambda _: loop.run_in_executor(executor, select))
            return hop / 1000, await per_call(n, direct) / 1000
        finally:
            conn.close()
    client = aioredis.Redis.from_url(url.split("?")[0])
    try:
        through = await per_call(n, lambda _: client.ping())
    finally:
        await client.aclose()
    return through / 1000, await raw_ping(url, n)


async def raw_ping(url: str, n: int) -> float:
    """A RESP `PING` on a plain asyncio stream, in ms; NaN for a server this cannot reach so
    (TLS, a password, a socket)."""
    parts = urlsplit(url)
    if parts.scheme != "redis" or parts.password or not parts.hostname:
        return math.nan
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 6379)

    async def ping(_: int) -> None:
        writer.write(b"*1\r\n$4\r\nPING\r\n")
        if await reader.readline() != b"+PONG\r\n":
            raise AssertionError("a raw PING was not answered PONG")

    try:
        return await per_call(n, ping) / 1000
    finally:
        writer.close()
        await writer.wait_closed()


def report_split(timings: list[float], split: Split, trip: tuple[float, float]) -> None:
    cycles = len(timings)
    store = sum(split.seconds.values()) * 1000 / cycles
    framework = statistics.fmean(timings) - store
    calls = sum(split.calls.values()) / cycles
    for name in sorted(split.calls):
        per_cycle = split.calls[name] / cycles
        each = split.seconds[name] * 1000 / split.calls[name]
        print(f"    {name:<12} {per_cycle:.2f} per cycle, {each:.3f} ms each")
    through, raw = trip
    print(
        f"    store calls {store:.3f} ms per cycle, framework {framework:.3f} ms, "
        f"bare round trip {through:.3f} ms ({raw:.3f} ms without the client's machinery), "
        f"floor {framework + calls * through:.3f} ms"
    )


def report(name: str, timings: list[float]) -> None:
    p50, p95 = percentiles(timings)
    print(
        f"{name:<8} cycles={len(timings):<6} mean={statistics.fmean(timings):.3f} ms  "
        f"p50={p50:.3f} ms  p95={p95:.3f} ms"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--redis", default=REDIS_URL)
    parser.add_argument("--split", action="store_true", help="where a cycle's time goes")
    args = parser.parse_args()
    async with store_urls(args.redis) as urls:
        for label, url in urls:
            timings, split = await bench(url, args.cycles, args.split)
            report(label, timings)
            if split is not None:
                report_split(timings, split, await round_trip(url))


if __name__ == "__main__":
    asyncio.run(main())
