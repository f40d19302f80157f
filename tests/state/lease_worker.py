"""Run by the cross-process lease test: try to take one thread's lease when told, print the result.

Usage: python -m tests.state.lease_worker STORE_URL OWNER
Prints `ready` once the store is open, waits for a line on stdin, tries once, prints `true` or
`false`, then holds whatever it won until stdin closes, so a loser cannot take it after it exits.
"""

from __future__ import annotations

import asyncio
import json
import sys

from state import open_store


async def main(url: str, owner: str) -> None:
    async with open_store(url) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        won = await store.acquire_thread("C1", "1.1", owner=owner, ttl=60)
        print(json.dumps(won), flush=True)
        await asyncio.to_thread(sys.stdin.readline)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
