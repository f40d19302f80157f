"""Run by the cross-process reminder test: one bot's periodic sweep, at a given time.

Usage: python -m tests.slack.sweep_worker STORE_URL SLACK_API_URL BOT_TOKEN SIGNING_SECRET
Prints `ready` once the bot is up; then for each line on stdin (a Unix time) sweeps until idle
with its clock there and prints `{"fired": n}` (expiries, reminders and escalations this process
fired); an empty line or the end of input stops it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from bot.slack import SlackBot, load_settings
from state import open_store

from . import agents


async def main(url: str, api_url: str, token: str, secret: str) -> None:
    now = 0.0
    settings = load_settings(
        slack_bot_token=token,
        slack_signing_secret=secret,
        slack_api_url=api_url,
        handback_store=url,
    )
    async with (
        open_store(url) as store,
        SlackBot(
            agent=agents.reminding_agent,
            store=store,
            settings=settings,
            clock=lambda: now,
            loops=False,
        ) as bot,
    ):
        print("ready", flush=True)
        while line := (await asyncio.to_thread(sys.stdin.readline)).strip():
            now = float(line)
            fired = await bot.sweeper.run_until_idle()
            print(json.dumps({"fired": fired}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
