"""The Slack path over real HTTP, per store: how fast a click is acked, and how fast it resumes.

    python bench/bench_slack.py [--rounds 200] [--redis redis://127.0.0.1:6379/0]

Each round: a person mentions the bot (signed event to the bot's real endpoint), the scripted
agent pauses on an approval and the card is posted to LocalSlack; then an approver clicks
Approve. Reported: mention -> card on screen, click -> HTTP ack (what Slack's 3-second budget
measures), and click -> card updated and the final answer posted in the thread.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from _stores import REDIS_URL, percentiles, store_urls

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.playground._slack import LocalSlack
from bot.slack import SlackBot, load_settings
from bot.slack._heap import freeze_startup_heap  # the CLI's own step, private to it
from bot.testing import FunctionModel
from state import open_store


def deploy(service: str) -> str:
    return f"deployed {service}"


def script(messages: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return [{"name": "deploy", "arguments": {"service": "api"}}]
    return "done: " + messages[-1]["content"]


async def bench(url: str, rounds: int) -> dict[str, list[float]]:
    agent = Agent(
        name="bench", model=FunctionModel(script), tools=[Tool(deploy, requires_approval=True)]
    )
    timings: dict[str, list[float]] = {
        "mention -> card": [],
        "click -> ack": [],
        "click -> answer": [],
    }
    async with LocalSlack() as slack:
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=url,
            handback_approvers="anyone",
        )
        async with (
            open_store(url) as store,
            SlackBot(agent=agent, store=store, settings=settings, loops=False) as bot,
            bot.serve_http("127.0.0.1", 0) as bot_url,
        ):
            slack.bot_url = bot_url
            freeze_startup_heap()  # as `handback run` does: `serve(freeze_heap=True)`
            for i in range(rounds + 20):
                card_ms, ack_ms, answer_ms = await one_round(slack)
                if i >= 20:  # warm-up
                    timings["mention -> card"].append(card_ms)
                    timings["click -> ack"].append(ack_ms)
                    timings["click -> answer"].append(answer_ms)
            await bot.drain()
    return timings


async def one_round(slack: LocalSlack) -> tuple[float, float, float]:
    start = time.perf_counter()
    asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "deploy api")
    card = await slack.wait_for(
        lambda: next((m for m in slack.bot_messages(thread_ts=asked.ts) if m.blocks), None)
    )
    carded = time.perf_counter()
    response = await slack.click("U0BOB", card.ts, ACTION_APPROVE)
    acked = time.perf_counter()
    assert response.status == 200
    await slack.wait_for(
        lambda: any(m.text == "done: deployed api" for m in slack.bot_messages(thread_ts=asked.ts))
    )
    answered = time.perf_counter()
    return (carded - start) * 1000, (acked - carded) * 1000, (answered - carded) * 1000


def report(name: str, timings: dict[str, list[float]]) -> None:
    for what, values in timings.items():
        p50, p95 = percentiles(values)
        print(f"{name:<8} {what:<16} p50={p50:6.2f} ms  p95={p95:6.2f} ms  (n={len(values)})")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--redis", default=REDIS_URL)
    args = parser.parse_args()
    async with store_urls(args.redis) as urls:
        for label, url in urls:
            report(label, await bench(url, args.rounds))


if __name__ == "__main__":
    asyncio.run(main())
