"""One ask -> pause -> resume cycle with a scripted model, per store; prints ms per cycle.

    python bench/bench_cycle.py [--cycles 2000] [--redis redis://127.0.0.1:6379/0]

A cycle is: a new run whose model calls `ask_user`, the run pausing (saved), then a resume with
the answer (one load, one claim, the handler re-run, the final model turn, saved). Durable on
every store: nothing is kept in memory between the two calls.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from _stores import REDIS_URL, percentiles, store_urls

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


async def bench(url: str, cycles: int) -> list[float]:
    async with open_store(url) as store:
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
        return timings


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
    args = parser.parse_args()
    async with store_urls(args.redis) as urls:
        for label, url in urls:
            report(label, await bench(url, args.cycles))


if __name__ == "__main__":
    asyncio.run(main())
