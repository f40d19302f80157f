"""The inbox worker: takes durable work items from the store, runs them, and marks them done.

Every event, click and modal answer the app accepts is in the store's inbox before Slack gets its
200. This side finishes them, at least once, in whichever process is alive: an item is leased to
one worker, its lease is renewed while it runs, and only a finished item is marked done. An item
whose worker died (or whose work hit a store outage) is taken again once its lease runs out, and
every step of the work is idempotent, so a retry finishes the work instead of repeating it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from dataclasses import dataclass

from state import InteractionRecord, Store, StoreError, Taker, ThreadLease, WorkItem

from .. import _logging, _metrics

__all__ = [
    "WORK_LEASE",
    "Work",
    "Worker",
    "derived_run_id",
    "hand_to_done",
    "in_work_item",
    "lease_handed_over",
]

log = logging.getLogger("handback.slack")

Handler = Callable[[WorkItem], Awaitable[None]]

WORK_LEASE = 5.0
"""Seconds an item stays with a worker that stopped renewing it; then another worker takes it.
Renewed three times per lease while the work runs, so it bounds how long a dead worker's items
wait (the issue's promise: found and finished within 5 seconds), never how long work may take."""

MAX_ATTEMPTS = 8
"""An item handed out this many times without finishing is dropped with an error in the log: a
payload that crashes every worker must not circle forever."""

_TAKE_MOST = 64

_BUSY_LOOP = 0.05
"""Seconds one turn of the event loop may take before new work waits in the inbox. Acks run on
the same loop: a process that took work faster than it can run it would answer Slack late (and
an inbox write that misses Slack's deadline is a request refused), so taking follows how busy
the loop is, not only the `concurrency` cap."""

_LAG_TICK = 0.02
"""Seconds between looks at how late the event loop runs, while work is in flight: an inbox write
asks for the worker's room in the middle of a request, where it cannot wait a turn to measure."""

_STORE_PAUSE = 0.01
"""Seconds between looks while the store has calls of this process waiting for their turn."""

_YIELD_PAUSE = 0.005
_YIELD_MOST = 0.25
"""Seconds taking waits at most for the app's requests in flight (`yield_to`): a burst of clicks
is acked before its resumes start, and a steady stream of requests cannot starve the work."""
_OUTAGE_PAUSE_FIRST = 0.2
_OUTAGE_PAUSE_MOST = 2.0


_HANDED_OVER: ContextVar[dict[tuple[str, str], ThreadLease] | None] = ContextVar(
    "handback_handed_over", default=None
)
"""Thread leases the work item running in this task holds past its turns, by thread: its `done`
frees them (and moves each thread on to its run) in the same round trip."""


def in_work_item() -> bool:
    """Whether this task runs a work item of the worker (and may `hand_to_done`)."""
    return _HANDED_OVER.get() is not None


def hand_to_done(lease: ThreadLease) -> bool:
    """Leave `lease` held until the work item running in this task is done, which releases it
    in the same round trip as the item; False outside a work item (release it yourself).

    Only the item's own task sees the hand-over: a turn run by another task releases its lease.
    A later hand-over of the same thread replaces the earlier one (same owner, see
    `lease_handed_over`).
    """
    handed = _HANDED_OVER.get()
    if handed is None:
        return False
    key = (lease.channel, lease.thread_ts)
    earlier = handed.get(key)
    if lease.run_id is None and earlier is not None and earlier.run_id is not None:
        # A later turn that ended without a run must not undo where an earlier one got.
        lease = ThreadLease(
            channel=lease.channel,
            thread_ts=lease.thread_ts,
            owner=lease.owner,
            run_id=earlier.run_id,
        )
    handed[key] = lease
    return True


def lease_handed_over(channel: str, thread_ts: str) -> ThreadLease | None:
    """The lease this work item still holds on the thread, if it handed one over: a second
    turn of the same item in that thread must take it as the same owner, or it would wait for
    its own lease."""
    handed = _HANDED_OVER.get()
    return None if handed is None else handed.get((channel, thread_ts))


def derived_run_id(work_id: str, purpose: str) -> str:
    """The run id a work item gives the run it starts, the same on every retry of that item, so
    the retry finds (and continues, or replays) the run instead of starting another."""
    digest = hashlib.sha256(f"{work_id}\x1f{purpose}".encode()).hexdigest()
    return f"run_{digest[:32]}"


@dataclass(frozen=True, kw_only=True)
class Work:
    """Which inbox item a piece of work comes from, and which attempt at it this is."""

    id: str
    attempt: int = 1
    about: str | None = None
    """The interaction the item names (a click's), read with it: `WorkItem.about`."""
    interaction: InteractionRecord | None = None
    """That interaction as the store read it with the item (`WorkItem.interaction`)."""

    def read_with_item(self, interaction_id: str) -> tuple[bool, InteractionRecord | None]:
        """`(True, record)` when the item came with `interaction_id` read on its first attempt,
        so the click needs no read of its own; `(False, None)` otherwise. A retry reads afresh:
        its first attempt may have answered it since."""
        if self.retry or self.about != interaction_id:
            return False, None
        return True, self.interaction

    def run_id(self, purpose: str) -> str:
        return derived_run_id(self.id, purpose)

    @property
    def retry(self) -> bool:
        """A later attempt: what the store shows as done may be this item's own earlier work."""
        return self.attempt > 1


class Worker:
    """Works the inbox with at most `concurrency` items at once; `run_until_idle()` for tests."""

    def __init__(
        self,
        *,
        store: Store,
        handle: Handler,
        consumer: str | None = None,
        lease: float = WORK_LEASE,
        concurrency: int = 1000,
        poll: float = 1.0,
        max_attempts: int = MAX_ATTEMPTS,
        yield_to: Callable[[], bool] = lambda: False,
    ) -> None:
        self.store = store
        self.handle = handle
        self.consumer = consumer or f"worker-{uuid.uuid4().hex[:12]}"
        self.lease = lease
        self.concurrency = concurrency
        self.poll = poll
        self.max_attempts = max_attempts
        self.yield_to = yield_to
        """True while something more urgent runs on this loop (the app recording Slack's
        requests before their deadline): new work waits until it is done."""
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._taking = 0
        """Items a `take` in flight may still bring (its `count`): not room to offer twice."""
        self._offered = 0
        """The room the last inbox write was told (`_room_for_writes`)."""
        self._took_all_new = False
        """Whether the last inbox write took every new item there was for this worker."""
        self._lag = 0.0
        self._lag_due = 0.0
        self._lag_timer: asyncio.TimerHandle | None = None
        self.taker = Taker(
            consumer=self.consumer,
            lease=lease,
            room=self._room_for_writes,
            accept=self.accept,
        )
        """For the app's inbox writes (`Store.enqueue`): they take work for this worker in the
        same round trip when it has room, which saves its `take`."""
        self._kicker: asyncio.Task[None] | None = None
        self._kick_again = False
        self._line: asyncio.Future[None] | None = None
        """The last item started: items begin their work in the order they were started (taken
        or handed, which is the inbox's order), whatever each waits for first."""
        self._stopping = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    @property
    def busy(self) -> int:
        return len(self._inflight)

    # ------------------------------------------------------------------ running

    async def run_forever(self) -> None:
        """Take and run items until `stop()`; a store outage pauses taking, never ends it."""
        keeper = asyncio.create_task(self._keep_leases(), name="handback-leases")
        pause = _OUTAGE_PAUSE_FIRST
        try:
            while not self._stopping.is_set():
                await self._room.wait()
                await self._wait_for_calm()
                try:
                    taken = await self._take(block=self.poll)
                except StoreError as error:
                    _metrics.STORE_ERRORS.labels(where="take").inc()
                    log.warning("cannot take work from the store (%s); retrying", error)
                    await self._pause(pause)
                    pause = min(pause * 2, _OUTAGE_PAUSE_MOST)
                    continue
                pause = _OUTAGE_PAUSE_FIRST
                for item in taken:
                    self._start(item)
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    def kick(self) -> None:
        """Start what the inbox has ready now, without waiting for it to finish; nothing to do
        when the last inbox write took every new item for this worker (`taker`).

        For a bot without its loops (tests, an embedded use): work this process recorded starts
        at once, as the blocking take of `run_forever` would start it.
        """
        if self._took_all_new:
            return
        self._kick_again = True
        if self._kicker is None or self._kicker.done():
            self._kicker = asyncio.create_task(self._kicked(), name="handback-kick")

    async def _kicked(self) -> None:
        while self._kick_again:
            self._kick_again = False
            # As `run_forever` does: what the app is still recording goes first.
            await self._wait_for_calm()
            try:
                for item in await self._take(block=0.0):
                    self._start(item)
            except StoreError as error:
                log.warning("cannot take work from the store (%s)", error)
                return

    def accept(self, items: list[WorkItem]) -> None:
        """Run `items`, which an inbox write of this process took for this worker (`taker`),
        as items of its own `take`: renewed while they run, done, retried, handed back at
        shutdown. Each starts once the app's requests in flight are answered (`yield_to`)."""
        self._took_all_new = len(items) < self._offered
        for item in items:
            _metrics.WORK_TAKEN.labels(kind=item.kind, by="record").inc()
            self._start(item, handed=True)

    async def run_until_idle(self) -> int:
        """Take and finish items until the inbox has nothing ready; how many were run."""
        ran = 0
        if self._kicker is not None:
            await asyncio.gather(self._kicker, return_exceptions=True)
        while True:
            try:
                taken = await self._take(block=0.0)
            except StoreError as error:
                # What was taken stays in the inbox for when the store answers again.
                log.warning("cannot take work from the store (%s)", error)
                taken = []
            if not taken and not self._inflight:
                return ran
            for item in taken:
                self._start(item)
                ran += 1
            if self._inflight:
                await asyncio.wait(list(self._inflight.values()))

    async def stop(self, *, grace: float) -> None:
        """Take nothing new, give running items `grace` seconds, then hand the rest back.

        Unfinished items are not marked done, so another worker takes them once their lease
        runs out; their work resumes from what the store has (the run's journal, the claims).
        """
        self._stopping.set()
        self._room.set()
        if self._lag_timer is not None:
            self._lag_timer.cancel()
            self._lag_timer = None
        running = list(self._inflight.values())
        if running:
            _, late = await asyncio.wait(running, timeout=grace)
            if late:
                log.warning("handing back %d unfinished work item(s) at shutdown", len(late))
                for task in late:
                    task.cancel()
                await asyncio.gather(*late, return_exceptions=True)

    # ------------------------------------------------------------------ steps

    async def _take(self, *, block: float) -> list[WorkItem]:
        room = self.concurrency - len(self._inflight)
        if room <= 0:
            return []
        count = min(room, _TAKE_MOST)
        self._taking += count
        try:
            taken = await self.store.take(self.consumer, count=count, lease=self.lease, block=block)
        finally:
            self._taking -= count
        for item in taken:
            _metrics.WORK_TAKEN.labels(kind=item.kind, by="take").inc()
        return taken

    def _room_for_writes(self) -> int:
        """How many items an inbox write may take for this worker now: none while it stops or
        its calm checks would hold its own take back (its work keeps the store's calls waiting,
        or the loop is slow), else its free room, less what a take in flight may still bring.
        Requests being answered do not count: the write is one, and its items wait for them."""
        self._offered = 0
        self._took_all_new = False
        room = min(self.concurrency - len(self._inflight) - self._taking, _TAKE_MOST)
        if self._stopping.is_set() or room <= 0:
            return 0
        if self._inflight and (self.store.calls_waiting or self._loop_busy()):
            return 0
        self._offered = room
        return room

    def _start(self, item: WorkItem, *, handed: bool = False) -> None:
        if item.item_id in self._inflight:
            return  # Taken back after a lease lapse while it still runs here: one copy is enough.
        before, mine = self._line, asyncio.get_running_loop().create_future()
        self._line = mine
        work = self._in_line(item, before, mine, handed=handed)
        task = asyncio.create_task(work, name=f"work-{item.kind}-{item.item_id}")
        self._inflight[item.item_id] = task
        if len(self._inflight) >= self.concurrency:
            self._room.clear()

        def finished(_: asyncio.Task[None]) -> None:
            self._inflight.pop(item.item_id, None)
            self._room.set()
            if not mine.done():
                mine.set_result(None)  # cancelled before it began: the next is not held up

        task.add_done_callback(finished)
        self._watch_loop()

    async def _in_line(
        self,
        item: WorkItem,
        before: asyncio.Future[None] | None,
        mine: asyncio.Future[None],
        *,
        handed: bool,
    ) -> None:
        """Run `item` once the item started before it has begun: a handed item first waits
        for calm, and a later one (a quick follow-up in the same thread, handed or taken) must
        not get to its thread's queue (`Dispatch`) first. The waits for calm run side by side
        (each measures the loop, so one after the other they would add up); only the entries
        into the work are in order, one wake-up apart."""
        try:
            if handed:
                # Started when its own take would have been made (`_wait_for_calm`): a burst of
                # clicks is acked before its work starts.
                await self._wait_for_calm()
            if before is not None:
                await asyncio.shield(before)
        finally:
            if not mine.done():
                mine.set_result(None)
        if handed and self._stopping.is_set():
            return  # Handed back: not done, so its lease lapses and another worker takes it.
        await self._run(item)

    async def _run(self, item: WorkItem) -> None:
        finished = functools.partial(
            _metrics.work_finished, item.kind, enqueued_at=item.enqueued_at
        )
        _metrics.work_taken(item.kind, attempts=item.attempts, enqueued_at=item.enqueued_at)
        _logging.bind(work_item=item.item_id, work_kind=item.kind)  # this item's task only
        if item.attempts > self.max_attempts:
            log.error(
                "dropping %s item %s after %d attempts", item.kind, item.item_id, item.attempts
            )
            await self._done(item, [])
            finished("dropped")
            return
        handed: dict[tuple[str, str], ThreadLease] = {}
        _HANDED_OVER.set(handed)  # this task's context: the item's own turns see it
        try:
            await self.handle(item)
        except StoreError as error:
            # Left in the inbox: once the store answers again the item is taken again and the
            # work finishes from where the store says it got to.
            log.warning("%s item %s waits for the store: %s", item.kind, item.item_id, error)
            await self._release(handed.values())
            finished("store_error")
            return
        except BaseException as error:
            if isinstance(error, Exception):
                # The handlers tell people about failures themselves; this is a bug. The item is
                # retried, up to `max_attempts`.
                log.exception("%s item %s failed", item.kind, item.item_id)
                finished("failed")
            # Unfinished (or handed back at shutdown): its threads are free for the retry.
            await asyncio.shield(self._release(handed.values()))
            if not isinstance(error, Exception):
                raise
            return
        await self._done(item, list(handed.values()))
        finished("done")

    async def _done(self, item: WorkItem, leases: list[ThreadLease]) -> None:
        try:
            await self.store.done(item.item_id, leases=leases)
        except StoreError as error:
            _metrics.STORE_ERRORS.labels(where="done").inc()
            # Taken again after its lease, the item finds its work done and changes nothing; a
            # thread lease left behind ends by itself.
            log.warning("could not mark item %s done: %s", item.item_id, error)

    async def _release(self, leases: Iterable[ThreadLease]) -> None:
        for lease in leases:
            try:
                await self.store.release_thread(lease.channel, lease.thread_ts, owner=lease.owner)
            except StoreError:
                # The lease ends by itself within its TTL.
                log.warning("could not release the lease of thread %s/%s", *_where(lease))

    async def _keep_leases(self) -> None:
        while True:
            await asyncio.sleep(self.lease / 3)
            held = list(self._inflight)
            if not held:
                continue
            try:
                kept = set(await self.store.extend(self.consumer, held, lease=self.lease))
            except StoreError as error:
                _metrics.STORE_ERRORS.labels(where="lease").inc()
                log.warning("could not renew the leases of %d item(s): %s", len(held), error)
                continue
            for lost in set(held) - kept:
                log.warning("work item %s was taken over by another worker", lost)

    async def _wait_for_calm(self) -> None:
        """Return once nothing more urgent runs, the store serves our calls without a queue
        and a turn of the event loop is quick again (or nothing of ours runs)."""
        loop = asyncio.get_running_loop()
        yielding_until = loop.time() + _YIELD_MOST
        while not self._stopping.is_set():
            if self.yield_to() and loop.time() < yielding_until:
                await self._pause(_YIELD_PAUSE)
                continue
            if not self._inflight:
                return
            if self.store.calls_waiting:
                # The work in flight already keeps the store's connections busy: more of it
                # would only lengthen the queue, where the app's inbox writes wait their turn
                # too, past Slack's deadline in a burst. The running work drains it.
                await self._pause(_STORE_PAUSE)
                continue
            began = loop.time()
            await asyncio.sleep(0)  # resumes after every callback that was ready has run
            if loop.time() - began < _BUSY_LOOP:
                return
            await self._pause(_BUSY_LOOP)

    def _watch_loop(self) -> None:
        """Look at how late the loop runs (`_loop_busy`) every `_LAG_TICK` while work runs."""
        if self._lag_timer is None and not self._stopping.is_set():
            self._lag = 0.0
            self._next_tick()

    def _next_tick(self) -> None:
        loop = asyncio.get_running_loop()
        self._lag_due = loop.time() + _LAG_TICK
        self._lag_timer = loop.call_at(self._lag_due, self._lag_tick)

    def _lag_tick(self) -> None:
        self._lag = asyncio.get_running_loop().time() - self._lag_due
        self._lag_timer = None
        if self._inflight and not self._stopping.is_set():
            self._next_tick()

    def _loop_busy(self) -> bool:
        """Whether a turn of the loop took `_BUSY_LOOP` or more, as `_wait_for_calm` measures
        it: the last look came that late, or the next one is that late already."""
        if self._lag_timer is None:
            return False
        late = asyncio.get_running_loop().time() - self._lag_due
        return self._lag >= _BUSY_LOOP or late >= _BUSY_LOOP

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)


def _where(lease: ThreadLease) -> tuple[str, str]:
    return lease.channel, lease.thread_ts
