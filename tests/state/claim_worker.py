"""Run by the cross-process test: claim one run when told to, and print the outcome as JSON.

Usage: python -m tests.state.claim_worker STORE_URL RUN_ID CHILD_ID
Prints `ready` once the store is open, waits for a line on stdin, claims, prints the result.
"""

from __future__ import annotations

import asyncio
import json
import sys

from state import open_store


async def main(url: str, run_id: str, child_id: str) -> None:
    async with open_store(url) as store:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        claim = await store.claim_run(run_id, child_id=child_id)
        resumed_by = None if claim.run is None else claim.run.resumed_by
        print(json.dumps({"won": claim.won, "resumed_by": resumed_by}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
