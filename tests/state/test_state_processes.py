"""Claims stay exactly-once when separate OS processes race on one SQLite file or one Redis."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from state import open_store

from .conftest import make_run

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
TIMEOUT = 30


async def _start(url: str, child_id: str) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.state.claim_worker",
        url,
        "run-1",
        child_id,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def _race(url: str) -> list[dict[str, object]]:
    procs = [await _start(url, f"child-{n}") for n in range(WORKERS)]
    try:
        async with asyncio.timeout(TIMEOUT):
            for proc in procs:
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"ready"
            # Every process has its store open; release them all at once.
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
            await asyncio.gather(*(proc.stdin.drain() for proc in procs if proc.stdin))
            outputs = [await proc.communicate() for proc in procs]
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert [proc.returncode for proc in procs] == [0] * WORKERS
    return [json.loads(stdout) for stdout, _ in outputs]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "cluster"])
async def test_processes_racing_for_one_run_have_one_winner(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(f"{kind}_store_url"))
    async with open_store(url) as store:
        await store.save_run(make_run())
        results = await _race(url)
        stored = await store.load_run("run-1")

    winners = [n for n, result in enumerate(results) if result["won"]]
    assert len(winners) == 1
    assert stored is not None and stored.resumed_by == f"child-{winners[0]}"
    assert all(result["resumed_by"] == stored.resumed_by for result in results)
