"""The worker and its process's heartbeat, on both stores: a busy event loop keeps its work, a
stuck one lets it go, at most `concurrency` items run at once, and shutdown hands work back
even when a cancel is swallowed."""

from __future__ import annotations

import asyncio
import time

# The worker and its heartbeat are unit-tested here, without a bot around them.
from bot.slack._liveness import Liveness
from bot.slack._worker import Worker
from state import Store, WorkItem

TTL = 1.0
"""Seconds: short, so that a lapse would show within the test."""


async def test_a_loop_blocked_longer_than_the_ttl_keeps_its_items(store: Store) -> None:
    """The handler blocks the event loop for 2.5 TTLs (a busy process, not a stuck one): the
    heartbeat's thread keeps the item, so another process's take gets nothing meanwhile."""
    liveness = Liveness(store, ttl=TTL)
    blocked = asyncio.Event()

    async def handle(item: WorkItem) -> None:
        blocked.set()
        time.sleep(2.5 * TTL)  # noqa: ASYNC251 - the point: the loop cannot turn

    worker = Worker(store=store, handle=handle, liveness=liveness)
    await store.enqueue("event", {"n": 1})
    await liveness.start()
    try:
        running = asyncio.create_task(worker.run_until_idle())
        await blocked.wait()
        await running
        assert await store.take("another-process", lease=TTL) == []
        assert await store.inbox_size() == 0
    finally:
        await liveness.aclose()
        await liveness.aclose()


async def test_a_stuck_loop_lets_its_items_go(store: Store) -> None:
    """Past the stall limit the heartbeat stops: another process gets the item after the TTL."""
    liveness = Liveness(store, ttl=TTL, stall_limit=0.3)
    await store.enqueue("event", {"n": 1})
    [item] = await store.take(liveness.name, lease=TTL)
    liveness.hold_item(item.item_id)
    await liveness.start()
    try:
        time.sleep(TTL + 0.5)  # noqa: ASYNC251 - stuck: no turn of the loop at all
        [again] = await store.take("another-process", lease=TTL)
        assert again.item_id == item.item_id
    finally:
        await liveness.aclose()


async def test_at_most_concurrency_items_run_at_once(store: Store) -> None:
    liveness = Liveness(store, ttl=TTL)
    running, most = 0, 0

    async def handle(item: WorkItem) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.02)
        running -= 1

    worker = Worker(store=store, handle=handle, liveness=liveness, concurrency=3)
    for n in range(12):
        await store.enqueue("event", {"n": n})
    assert await worker.run_until_idle() == 12
    assert most == 3
    assert await store.inbox_size() == 0


async def test_shutdown_hands_back_work_whose_first_cancel_was_swallowed(store: Store) -> None:
    """As Python 3.11's `asyncio.wait_for` inside a store call may: the first cancel is lost;
    `stop()` sends another until the task has ended, and the item stays in the inbox."""
    liveness = Liveness(store, ttl=TTL)
    started = asyncio.Event()
    cancels = 0

    async def handle(item: WorkItem) -> None:
        nonlocal cancels
        started.set()
        while True:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancels += 1
                if cancels > 1:
                    raise

    worker = Worker(store=store, handle=handle, liveness=liveness)
    await store.enqueue("event", {"n": 1})
    serving = asyncio.create_task(worker.run_forever())
    await started.wait()
    await asyncio.wait_for(worker.stop(grace=0.1), timeout=5)
    await asyncio.wait_for(serving, timeout=5)
    assert cancels == 2
    assert worker.busy == 0
    assert await store.inbox_size() == 1


async def test_stop_does_not_wait_out_the_blocking_take(store: Store) -> None:
    """A worker idle in its blocking take (a 30 s poll here) ends as soon as it is stopped, and
    work that arrives after leaves the inbox to the next process."""
    liveness = Liveness(store, ttl=TTL)

    async def handle(item: WorkItem) -> None:
        raise AssertionError("nothing should run")

    worker = Worker(store=store, handle=handle, liveness=liveness, poll=30.0)
    serving = asyncio.create_task(worker.run_forever())
    # Some turns of the loop, so the worker is inside the store's blocking take.
    await asyncio.sleep(0.2)
    assert not serving.done()
    started = time.monotonic()
    await worker.stop(grace=1.0)
    await asyncio.wait_for(serving, timeout=10)
    assert time.monotonic() - started < 10
    await store.enqueue("event", {"n": 1})
    assert await store.inbox_size() == 1


class _Queued:
    """The store, with the count of its calls waiting for their turn set by the test, and
    each look at that count and each take seen."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.waiting = 0
        self.looks = 0
        self.looked = asyncio.Event()
        self.takes = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    @property
    def calls_waiting(self) -> int:
        self.looks += 1
        self.looked.set()
        return self.waiting

    async def take(self, consumer: str, **options: float) -> list[WorkItem]:
        self.takes += 1
        return await self._store.take(consumer, **options)  # type: ignore[arg-type]


async def test_a_kicked_worker_takes_nothing_while_the_stores_calls_queue(store: Store) -> None:
    """A bot without its loops starts recorded work by a kick; like `run_forever`, the kick
    takes no more while this process's store calls queue (where the web side's inbox writes,
    hence its acks, wait too), and takes it once the queue is gone."""
    queued = _Queued(store)
    liveness = Liveness(store, ttl=TTL)
    started: dict[int, asyncio.Event] = {1: asyncio.Event(), 2: asyncio.Event()}
    release = asyncio.Event()

    async def handle(item: WorkItem) -> None:
        started[item.body["n"]].set()
        await release.wait()

    worker = Worker(store=queued, handle=handle, liveness=liveness)  # type: ignore[arg-type]
    await store.enqueue("event", {"n": 1})
    worker.kick()
    await asyncio.wait_for(started[1].wait(), timeout=5)
    queued.waiting = 1
    await store.enqueue("event", {"n": 2})
    takes = queued.takes
    worker.kick()
    for _ in range(2):  # the kick looked at the queue, and again after its pause
        queued.looked.clear()
        await asyncio.wait_for(queued.looked.wait(), timeout=5)
    assert queued.takes == takes
    assert not started[2].is_set()
    queued.waiting = 0
    await asyncio.wait_for(started[2].wait(), timeout=5)
    release.set()
    await worker.run_until_idle()
    assert await store.inbox_size() == 0


async def test_work_recorded_while_a_kick_waits_is_all_taken_by_it(store: Store) -> None:
    """More items than one take brings, recorded while the kick waited for the store's queue:
    that kick takes them all, with no kick after them."""
    queued = _Queued(store)
    liveness = Liveness(store, ttl=TTL)
    first, every = asyncio.Event(), asyncio.Event()
    started: set[int] = set()
    release = asyncio.Event()

    async def handle(item: WorkItem) -> None:
        started.add(item.body["n"])
        first.set()
        if len(started) == 41:
            every.set()
        await release.wait()

    worker = Worker(store=queued, handle=handle, liveness=liveness)  # type: ignore[arg-type]
    await store.enqueue("event", {"n": 0})
    worker.kick()
    await asyncio.wait_for(first.wait(), timeout=5)
    queued.waiting = 1
    for n in range(1, 41):
        await store.enqueue("event", {"n": n})
        worker.kick()
    queued.looked.clear()
    await asyncio.wait_for(queued.looked.wait(), timeout=5)
    queued.waiting = 0
    await asyncio.wait_for(every.wait(), timeout=10)
    release.set()
    await worker.run_until_idle()
    assert await store.inbox_size() == 0
