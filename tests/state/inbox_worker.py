"""Run by the cross-process inbox test: take items until told the inbox is complete and it is
empty, finishing each one, then print the numbers of the items it took as JSON.

Usage: python -m tests.state.inbox_worker STORE_URL CONSUMER
Prints `ready` once the store is open, starts taking on the first line of stdin, and stops once
a second line (or the end of stdin) came and nothing is left: no item waiting or leased.
"""

from __future__ import annotations

import asyncio
import json
import sys

from state import open_store


async def main(url: str, consumer: str) -> None:
    async with open_store(url) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        complete = asyncio.create_task(asyncio.to_thread(sys.stdin.readline))
        taken: list[int] = []
        while True:
            items = await store.take(consumer, count=4, lease=30, block=0.05)
            for item in items:
                taken.append(item.body["n"])
                await asyncio.sleep(0.002)  # some work, so both processes take turns
                await store.done(item.item_id)
            if not items and complete.done() and await store.inbox_size() == 0:
                break
        print(json.dumps(taken), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
