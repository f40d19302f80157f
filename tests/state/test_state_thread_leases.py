"""Thread leases: one holder at a time, across tasks, connections and OS processes."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from state import Store, open_store

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
TIMEOUT = 30


async def _acquire_soon(store: Store, owner: str) -> None:
    """Until `owner` takes the lease of C1/1.1 (5 s at most), trying every 10 ms: a lease ends
    by time alone, so there is no event to wait on."""
    async with asyncio.timeout(5):
        while not await store.acquire_thread("C1", "1.1", owner=owner, ttl=60):  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_one_of_twenty_concurrent_acquirers_wins(store_url: str) -> None:
    async with AsyncExitStack() as stack:
        stores = [await stack.enter_async_context(open_store(store_url)) for _ in range(20)]
        won = await asyncio.gather(
            *(
                store.acquire_thread("C1", "1.1", owner=f"owner-{n}", ttl=60)
                for n, store in enumerate(stores)
            )
        )
        assert sorted(won) == [False] * 19 + [True]
        winner = won.index(True)
        # Only the winner's release frees it; then any other owner can take it.
        for n, store in enumerate(stores):
            if n != winner:
                await store.release_thread("C1", "1.1", owner=f"owner-{n}")
        assert not await stores[0].acquire_thread("C1", "1.1", owner="late", ttl=60)
        await stores[winner].release_thread("C1", "1.1", owner=f"owner-{winner}")
        assert await stores[0].acquire_thread("C1", "1.1", owner="late", ttl=60)


async def test_a_release_by_another_owner_does_nothing(store: Store) -> None:
    assert await store.acquire_thread("C1", "1.1", owner="a", ttl=60)
    await store.release_thread("C1", "1.1", owner="b")
    assert not await store.acquire_thread("C1", "1.1", owner="b", ttl=60)
    await store.release_thread("C1", "1.1", owner="a")
    assert await store.acquire_thread("C1", "1.1", owner="b", ttl=60)
    # Releasing a lease nobody holds, or twice, is fine.
    await store.release_thread("C1", "1.1", owner="b")
    await store.release_thread("C1", "1.1", owner="b")
    await store.release_thread("C9", "9.9", owner="b")
    assert await store.acquire_thread("C1", "1.1", owner="c", ttl=60)


async def test_an_expired_lease_can_be_taken(store: Store) -> None:
    started = time.monotonic()
    assert await store.acquire_thread("C1", "1.1", owner="crashed", ttl=0.1)
    assert not await store.acquire_thread("C1", "1.1", owner="next", ttl=60)
    await _acquire_soon(store, "next")
    assert time.monotonic() - started >= 0.09
    # The holder that outlived its lease can neither take it back nor release the new one.
    assert not await store.acquire_thread("C1", "1.1", owner="crashed", ttl=60)
    await store.release_thread("C1", "1.1", owner="crashed")
    assert not await store.acquire_thread("C1", "1.1", owner="other", ttl=60)


async def test_the_holder_extends_its_lease_by_acquiring_again(store: Store) -> None:
    assert await store.acquire_thread("C1", "1.1", owner="a", ttl=0.1)
    assert await store.acquire_thread("C1", "1.1", owner="a", ttl=60)
    await asyncio.sleep(0.2)  # past the first TTL: the refreshed lease still holds
    assert not await store.acquire_thread("C1", "1.1", owner="b", ttl=60)


async def test_threads_have_leases_of_their_own(store: Store) -> None:
    assert await store.acquire_thread("C1", "1.1", owner="a", ttl=60)
    assert await store.acquire_thread("C1", "1.2", owner="b", ttl=60)
    assert await store.acquire_thread("C2", "1.1", owner="c", ttl=60)
    # Escaped like thread keys: (`a:b`, `c`) and (`a`, `b:c`) are two threads.
    assert await store.acquire_thread("a:b", "c", owner="d", ttl=60)
    assert await store.acquire_thread("a", "b:c", owner="e", ttl=60)
    # A lease is not the thread's run mapping.
    assert await store.get_thread_run("C1", "1.1") is None


@pytest.mark.parametrize("ttl", [0.0, -1.0, math.nan, math.inf])
async def test_a_lease_must_end_and_have_an_owner(store: Store, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        await store.acquire_thread("C1", "1.1", owner="a", ttl=ttl)
    with pytest.raises(ValueError, match="owner"):
        await store.acquire_thread("C1", "1.1", owner="", ttl=60)
    assert await store.acquire_thread("C1", "1.1", owner="a", ttl=0.0001)


async def _start(url: str, owner: str) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.state.lease_worker",
        url,
        owner,
        cwd=ROOT,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
async def test_processes_racing_for_one_thread_have_one_holder(store_url: str) -> None:
    procs = [await _start(store_url, f"proc-{n}") for n in range(WORKERS)]
    try:
        async with asyncio.timeout(TIMEOUT):
            for proc in procs:
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"ready"
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(b"go\n")
            await asyncio.gather(*(proc.stdin.drain() for proc in procs if proc.stdin))
            won = []
            for proc in procs:
                assert proc.stdout is not None
                won.append(json.loads(await proc.stdout.readline()))
            async with open_store(store_url) as store:
                # Still held by the winner, from outside every worker.
                assert not await store.acquire_thread("C1", "1.1", owner="outsider", ttl=60)
                winner = won.index(True)
                await store.release_thread("C1", "1.1", owner=f"proc-{winner}")
                assert await store.acquire_thread("C1", "1.1", owner="outsider", ttl=60)
            outputs = [await proc.communicate(b"") for proc in procs]
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert sorted(won) == [False] * (WORKERS - 1) + [True]
    assert [proc.returncode for proc in procs] == [0] * WORKERS
    assert all(stdout == b"" for stdout, _ in outputs)
