"""Two OS processes working one inbox (an SQLite file or one Redis) together take every item
exactly once when neither dies, including items enqueued while they run."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from state import open_store

ROOT = Path(__file__).resolve().parents[2]
ITEMS = 200
WORKERS = 2
TIMEOUT = 60


async def _start(url: str, consumer: str) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.state.inbox_worker",
        url,
        consumer,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def _tell(procs: list[asyncio.subprocess.Process], line: bytes) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(line)
    await asyncio.gather(*(proc.stdin.drain() for proc in procs if proc.stdin))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "redis", "cluster"])
async def test_two_processes_take_every_item_exactly_once(
    kind: str, request: pytest.FixtureRequest
) -> None:
    url = str(request.getfixturevalue(f"{kind}_store_url"))
    async with open_store(url) as store:
        procs = [await _start(url, f"worker-{n}") for n in range(WORKERS)]
        try:
            async with asyncio.timeout(TIMEOUT):
                for proc in procs:
                    assert proc.stdout is not None
                    assert (await proc.stdout.readline()).strip() == b"ready"
                half = ITEMS // 2
                for n in range(half):
                    await store.enqueue("event", {"n": n}, dedupe=f"Ev{n}")
                await _tell(procs, b"go\n")
                for n in range(half, ITEMS):
                    await store.enqueue("event", {"n": n}, dedupe=f"Ev{n}")
                await _tell(procs, b"complete\n")
                outputs = [await proc.communicate() for proc in procs]
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        assert [proc.returncode for proc in procs] == [0] * WORKERS
        assert await store.inbox_size() == 0

    taken = [json.loads(stdout) for stdout, _ in outputs]
    everything = [n for numbers in taken for n in numbers]
    assert sorted(everything) == list(range(ITEMS))  # each one, once
    assert all(numbers for numbers in taken), "both processes should have taken work"
    for numbers in taken:  # each process sees the items in the order they were enqueued
        assert numbers == sorted(numbers)
