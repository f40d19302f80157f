"""The inbox worker: takes durable work items from the store, runs them, and marks them done.

Every event, click and modal answer the app accepts is in the store's inbox before Slack gets its
200. This side finishes them, at least once, in whichever process is alive: an item is leased to
one process, its lease is kept by the process's heartbeat (`Liveness`) while it runs, and only a
finished item is marked done. An item whose process died is taken again once its lease runs out
(the liveness TTL), an item whose work hit a store outage is run again at once, and every step of
the work is idempotent, so a retry finishes the work instead of repeating it.

How much runs at once is bounded, not timed: at most `concurrency` items, and no new take while
the store's calls queue (the work in flight already keeps it busy, and the web side's inbox
writes wait in that queue too).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from state import InteractionRecord, StoreError, WorkItem

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import InboxWork

from .. import _logging, _metrics
from ._liveness import Liveness

__all__ = ["Work", "Worker", "derived_run_id"]

log = logging.getLogger("handback.slack")

Handler = Callable[[WorkItem], Awaitable[None]]

MAX_ATTEMPTS = 8
"""An item handed out this many times without finishing is dropped with an error in the log: a
payload that crashes every worker must not circle forever."""

_SETTLE_TURNS = 8
"""Loop turns `run_until_idle` gives a take of `run_forever` that is being answered."""
_TAKE_MOST = 16
"""Items one take brings at most: a quarter of a Redis store's default pool, so one batch's first
calls cannot fill it before the queue check sees them."""

_QUEUE_LOOK = 0.01
"""Seconds between looks at the store's queue of calls while it has calls of this process
waiting for a connection (or its database thread): taking waits until there are none."""

_RETRY_SOON = 0.2
"""Seconds before an item whose work met a store outage is tried again (then doubling, to
`_OUTAGE_PAUSE_MOST`): it stays this process's, so it is finished as soon as the store answers,
not a lease later."""

_OUTAGE_PAUSE_FIRST = 0.2
_OUTAGE_PAUSE_MOST = 2.0

_CANCEL_LOOK = 0.1
"""Seconds between cancels of a task handed back at shutdown: a cancel that lands inside a store
call may be swallowed there (Python 3.11's `asyncio.wait_for`), so it is sent until it lands."""


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
        store: InboxWork,
        handle: Handler,
        liveness: Liveness,
        concurrency: int = 1000,
        poll: float = 1.0,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        self.store = store
        self.handle = handle
        self.liveness = liveness
        self.consumer = liveness.name
        self.concurrency = concurrency
        self.poll = poll
        self.max_attempts = max_attempts
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._kicker: asyncio.Task[None] | None = None
        self._kick_again = False
        self._stopping = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()

    @property
    def busy(self) -> int:
        return len(self._inflight)

    @property
    def lease(self) -> float:
        """Seconds an item stays this process's after its last heartbeat."""
        return self.liveness.ttl

    # ------------------------------------------------------------------ running

    async def run_forever(self) -> None:
        """Take and run items until `stop()`; a store outage pauses taking, never ends it."""
        pause = _OUTAGE_PAUSE_FIRST
        while not self._stopping.is_set():
            await self._room.wait()
            await self._store_unqueued()
            try:
                taken = await self._take_unless_stopped()
            except StoreError as error:
                _metrics.STORE_ERRORS.labels(where="take").inc()
                log.warning("cannot take work from the store (%s); retrying", error)
                await self._pause(pause)
                pause = min(pause * 2, _OUTAGE_PAUSE_MOST)
                continue
            pause = _OUTAGE_PAUSE_FIRST
            if self._stopping.is_set():
                break  # taken while stopping: left to lapse, another process takes them
            for item in taken:
                self._start(item)
            if taken:
                # The items just started make their first store calls before the next look at
                # the store's queue, or it would look empty while they are about to fill it.
                await asyncio.sleep(0)

    def kick(self) -> None:
        """Start what the inbox has ready now, without waiting for it to finish.

        For a bot without its loops (tests, an embedded use): work this process recorded starts
        at once, as the blocking take of `run_forever` would start it.
        """
        self._kick_again = True
        if self._kicker is None or self._kicker.done():
            self._kicker = asyncio.create_task(self._kicked(), name="handback-kick")

    async def _kicked(self) -> None:
        full = False
        while self._kick_again or full:
            self._kick_again = False
            # `run_forever`'s rule: nothing more while this process's store calls queue, where
            # the web side's inbox writes (the acks) wait too. The kicks of the items recorded
            # meanwhile are this one: a take as full as asked for may have left some behind.
            await self._store_unqueued()
            try:
                taken = await self._take(block=0.0)
            except StoreError as error:
                log.warning("cannot take work from the store (%s)", error)
                return
            full = len(taken) == _TAKE_MOST
            for item in taken:
                self._start(item)
            if taken:
                # As in `run_forever`: their first store calls come before the next look.
                await asyncio.sleep(0)

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
                # `run_forever`'s take may have been handed an item a few loop turns before
                # it starts it (the reply, then the wait on it): let those turns run, look again.
                for _ in range(_SETTLE_TURNS):
                    await asyncio.sleep(0)
                if not self._inflight:
                    return ran
            for item in taken:
                self._start(item)
                ran += 1
            if self._inflight:
                await asyncio.wait(list(self._inflight.values()))

    async def stop(self, *, grace: float) -> None:
        """Take nothing new, give running items `grace` seconds, then hand the rest back.

        Unfinished items are not marked done, so another process takes them once their lease
        runs out; their work resumes from what the store has (the run's journal, the claims).
        Each is cancelled until it has ended: one cancel may be swallowed inside a store call.
        """
        self._stopping.set()
        self._room.set()
        running = list(self._inflight.values())
        if not running:
            return
        _, late = await asyncio.wait(running, timeout=grace)
        if late:
            log.warning("handing back %d unfinished work item(s) at shutdown", len(late))
        while late:
            for task in late:
                task.cancel()
            _, late = await asyncio.wait(late, timeout=_CANCEL_LOOK)

    # ------------------------------------------------------------------ steps

    async def _take_unless_stopped(self) -> list[WorkItem]:
        """The blocking take of `run_forever`, given up as soon as `stop()` is called, so that
        shutdown does not wait out the poll. Whatever the store handed this process meanwhile
        is left to lapse, as items taken while stopping are."""
        take = asyncio.ensure_future(self._take(block=self.poll))
        stopping = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({take, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            if not take.done():
                take.cancel()
                await asyncio.gather(take, return_exceptions=True)
        return [] if take.cancelled() else take.result()

    async def _take(self, *, block: float) -> list[WorkItem]:
        room = self.concurrency - len(self._inflight)
        if room <= 0 or self._stopping.is_set():
            return []
        count = min(room, _TAKE_MOST)
        taken = await self.store.take(self.consumer, count=count, lease=self.lease, block=block)
        for item in taken:
            _metrics.WORK_TAKEN.labels(kind=item.kind, by="take").inc()
        return taken

    async def _store_unqueued(self) -> None:
        """Return once the store has no calls of this process waiting for their turn (or
        nothing of ours runs): more work would only lengthen the queue, where the web side's
        inbox writes wait too. The work in flight drains it."""
        while self._inflight and self.store.calls_waiting and not self._stopping.is_set():
            await self._pause(_QUEUE_LOOK)

    def _start(self, item: WorkItem) -> None:
        if item.item_id in self._inflight:
            # Taken again by this process while it still runs it: its heartbeat had stopped
            # (a stalled loop, the store out of reach) past the lease. One copy is enough.
            _metrics.WORK_TAKEN_OVER.labels(by="self").inc()
            log.warning("work item %s was taken again while it still runs here", item.item_id)
            return
        self.liveness.hold_item(item.item_id)
        task = asyncio.create_task(self._run(item), name=f"work-{item.kind}-{item.item_id}")
        self._inflight[item.item_id] = task
        if len(self._inflight) >= self.concurrency:
            self._room.clear()

        def finished(_: asyncio.Task[None]) -> None:
            self.liveness.drop_item(item.item_id)
            self._inflight.pop(item.item_id, None)
            self._room.set()

        task.add_done_callback(finished)

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
            await self._done(item)
            finished("dropped")
            return
        pause = _RETRY_SOON
        while True:
            try:
                await self.handle(item)
            except StoreError as error:
                # Still this process's (its heartbeat keeps it): tried again here as soon as the
                # store answers, from where the store says the work got to.
                log.warning("%s item %s waits for the store: %s", item.kind, item.item_id, error)
                finished("store_error")
                if self._stopping.is_set():
                    return  # handed back: another process takes it after the lease
                await self._pause(pause)
                pause = min(pause * 2, _OUTAGE_PAUSE_MOST)
                # A later attempt: what the store shows as done may be this one's own work
                # (a claim whose reply was lost), as for a retry by another process.
                item = dataclasses.replace(item, attempts=item.attempts + 1)
                continue
            except Exception:
                # The handlers tell people about failures themselves; this is a bug. The item is
                # retried (by the next take, after its lease), up to `max_attempts`.
                log.exception("%s item %s failed", item.kind, item.item_id)
                finished("failed")
                return
            break
        await self._done(item)
        finished("done")

    async def _done(self, item: WorkItem) -> None:
        # Dropped from the heartbeat first: a beat that then finds it gone is no takeover.
        self.liveness.drop_item(item.item_id)
        try:
            await self.store.done(item.item_id)
        except StoreError as error:
            _metrics.STORE_ERRORS.labels(where="done").inc()
            # Taken again after its lease, the item finds its work done and changes nothing.
            log.warning("could not mark item %s done: %s", item.item_id, error)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)
