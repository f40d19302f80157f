"""The heartbeat contract, on both stores: one beat, over a connection of its own, keeps a
process's inbox items and thread leases; without beats they go to another process after the
TTL; a beat never takes back what was finished or taken."""

from __future__ import annotations

import asyncio
import time

from state import Store

# The heartbeat's outcomes are the lease keeper's own, tested here as a unit.
from state._beat import Held, Lost

# Coordination records, kept out of `state.__all__`: this test pins the store's side.
from state._records import ThreadLease

TTL = 0.6
"""Seconds: short, so that the lapse the tests wait for comes quickly."""


def lease(owner: str = "turn-a", thread_ts: str = "1.0") -> ThreadLease:
    return ThreadLease(channel="C1", thread_ts=thread_ts, owner=owner)


async def beat(store: Store, held: Held) -> Lost:
    """Beat from a thread of its own, as a process's heartbeat does."""
    heartbeat = store.open_heartbeat()
    try:
        return await asyncio.to_thread(heartbeat.beat, held, ttl=TTL)
    finally:
        heartbeat.close()
        heartbeat.close()  # closing twice is fine


async def test_beats_keep_items_and_threads_past_their_ttl(store: Store) -> None:
    # A TTL well over a busy machine's scheduling gaps (this test is about the beats keeping
    # things, not about how soon they lapse), and the connection opened before the holds.
    ttl = 2.0
    heartbeat = store.open_heartbeat()
    try:
        item_id = await store.enqueue("event", {"n": 1})
        [taken] = await store.take("proc-a", lease=ttl)
        assert await store.acquire_thread("C1", "1.0", owner="turn-a", ttl=ttl)
        held = Held(consumer="proc-a", items=(taken.item_id,), threads=(lease(),))
        deadline = time.monotonic() + 2 * ttl
        while time.monotonic() < deadline:
            lost = await asyncio.to_thread(heartbeat.beat, held, ttl=ttl)
            assert lost == Lost()
            assert await store.take("proc-b", lease=ttl) == []
            assert not await store.acquire_thread("C1", "1.0", owner="turn-b", ttl=ttl)
            await asyncio.sleep(ttl / 8)
    finally:
        heartbeat.close()
    assert taken.item_id == item_id


async def test_without_beats_another_process_gets_it_all_after_the_ttl(store: Store) -> None:
    await store.enqueue("event", {"n": 1})
    [taken] = await store.take("proc-a", lease=TTL)
    assert await store.acquire_thread("C1", "1.0", owner="turn-a", ttl=TTL)
    assert await beat(store, Held(consumer="proc-a", items=(taken.item_id,))) == Lost()
    await asyncio.sleep(TTL + 0.2)
    [again] = await store.take("proc-b", lease=TTL)
    assert (again.item_id, again.attempts) == (taken.item_id, 2)
    assert await store.acquire_thread("C1", "1.0", owner="turn-b", ttl=TTL)
    # The late beat of the first process learns it lost both, and takes neither back.
    late = await beat(
        store, Held(consumer="proc-a", items=(taken.item_id,), threads=(lease("turn-a"),))
    )
    assert late == Lost(items=(taken.item_id,), threads=(lease("turn-a"),))
    assert not await store.acquire_thread("C1", "1.0", owner="turn-a", ttl=TTL)
    assert await store.take("proc-a", lease=TTL) == []


async def test_a_beat_after_done_or_release_takes_nothing_back(store: Store) -> None:
    await store.enqueue("event", {"n": 1})
    [taken] = await store.take("proc-a", lease=TTL)
    assert await store.acquire_thread("C1", "1.0", owner="turn-a", ttl=TTL)
    await store.done(taken.item_id)
    await store.release_thread("C1", "1.0", owner="turn-a")
    held = Held(consumer="proc-a", items=(taken.item_id,), threads=(lease(),))
    assert await beat(store, held) == Lost(items=(taken.item_id,), threads=(lease(),))
    assert await store.inbox_size() == 0
    assert await store.acquire_thread("C1", "1.0", owner="turn-b", ttl=TTL)


async def test_a_beat_with_nothing_held_is_harmless(store: Store) -> None:
    assert await beat(store, Held(consumer="proc-a")) == Lost()


async def test_takes_by_the_old_shorter_lease_never_get_a_beating_process_items(
    store: Store,
) -> None:
    """A rolling upgrade: processes of the release before the heartbeat take by a short lease
    (5 s by default, XAUTOCLAIM by idle time on Redis); beats more often than that (every
    1.5 s by default, `beat_interval`) keep a new process's items from them, here scaled down."""
    old_lease = 0.5
    await store.enqueue("event", {"n": 1})
    [taken] = await store.take("proc-new", lease=15.0)
    held = Held(consumer="proc-new", items=(taken.item_id,))
    heartbeat = store.open_heartbeat()
    try:
        deadline = time.monotonic() + 4 * old_lease
        while time.monotonic() < deadline:
            assert await asyncio.to_thread(heartbeat.beat, held, ttl=15.0) == Lost()
            await asyncio.sleep(old_lease * 0.3)
            assert await store.take("proc-old", lease=old_lease) == []
    finally:
        heartbeat.close()
