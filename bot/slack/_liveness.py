"""This process's hold on its work: one heartbeat renews every inbox item and thread lease it
holds, from a thread of its own over a store connection of its own, so a busy event loop never
costs the process its work; a watchdog stops the beats when the loop has not turned for
`stall_limit` seconds, so a process that is stuck (not just busy) lets its work go.

A lease decides who works on something and how soon a dead process's work moves on (within the
liveness TTL); the claims and the journal decide whether work is done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable

from state import Inbox, StoreError

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._beat import Heartbeat, Held, Lost
from state._keys import LIVENESS_TTL
from state._records import ThreadLease

from .. import _metrics

__all__ = ["STALL_LIMIT", "Liveness", "beat_interval"]

log = logging.getLogger("handback.slack")

STALL_LIMIT = 30.0
"""Seconds the event loop may go without a turn before the heartbeat stops: the process is
stuck, and its work should move on to one that is not."""

_TURN_TICK = 1.0
"""Seconds between the watchdog's marks that the loop turned (less for a short stall limit)."""

_OLD_LEASE = 5.0
"""The inbox lease of releases before the heartbeat (`HANDBACK_WORK_LEASE`'s default): their
takes treat an item idle that long as free, so beats come more often than that, and old and new
processes on one store during a rolling upgrade never take each other's live items."""


def beat_interval(ttl: float) -> float:
    """Ten beats per TTL, and at least one per 1.5 s (see `_OLD_LEASE`)."""
    return min(ttl / 10, _OLD_LEASE * 0.3)


class Liveness:
    """What this process holds, and the heartbeat that keeps it.

    The worker and the thread turns register what they take (`hold_item`, `hold_thread`) and
    drop it *before* they give it back to the store, so a beat that finds something gone while
    it is still registered means another process took it: counted in
    `handback_work_taken_over_total` and logged.
    """

    def __init__(
        self,
        store: Inbox,
        *,
        ttl: float = LIVENESS_TTL,
        stall_limit: float = STALL_LIMIT,
        name: str | None = None,
    ) -> None:
        self.store = store
        self.ttl = ttl
        self.stall_limit = stall_limit
        self.name = name or f"proc-{uuid.uuid4().hex[:12]}"
        """The process's inbox consumer name."""
        self._lock = threading.Lock()
        self._items: set[str] = set()
        self._threads: dict[tuple[str, str, str], ThreadLease] = {}
        self._turned = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stalled = False
        self.on_lost: Callable[[Lost], None] | None = None
        """Called on the event loop with what a beat found taken while still registered."""

    # -------------------------------------------------------------- registry

    def hold_item(self, item_id: str) -> None:
        with self._lock:
            self._items.add(item_id)

    def drop_item(self, item_id: str) -> None:
        with self._lock:
            self._items.discard(item_id)

    def holds_item(self, item_id: str) -> bool:
        with self._lock:
            return item_id in self._items

    def hold_thread(self, lease: ThreadLease) -> None:
        with self._lock:
            self._threads[(lease.channel, lease.thread_ts, lease.owner)] = lease

    def drop_thread(self, lease: ThreadLease) -> None:
        with self._lock:
            self._threads.pop((lease.channel, lease.thread_ts, lease.owner), None)

    def held(self) -> Held:
        with self._lock:
            return Held(
                consumer=self.name,
                items=tuple(sorted(self._items)),
                threads=tuple(self._threads.values()),
            )

    # -------------------------------------------------------------- running

    async def start(self) -> None:
        """Start the watchdog on this loop and the beating thread (once)."""
        if self._thread is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._turned = time.monotonic()
        heartbeat = self.store.open_heartbeat()
        self._watchdog = asyncio.create_task(self._mark_turns(), name="handback-watchdog")
        self._thread = threading.Thread(
            target=self._beat_forever, args=(heartbeat,), name="handback-heartbeat", daemon=True
        )
        self._thread.start()

    async def aclose(self) -> None:
        """Stop beating; what is still held lapses after the TTL (closing twice is fine)."""
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
            self._watchdog = None
        thread, self._thread = self._thread, None
        if thread is not None:
            await asyncio.to_thread(thread.join)

    def beat(self, heartbeat: Heartbeat) -> Lost | None:
        """One beat, unless the loop is stuck or nothing is held; None when none was made."""
        stalled = time.monotonic() - self._turned > self.stall_limit
        if stalled != self._stalled:
            self._stalled = stalled
            if stalled:
                log.error(
                    "the event loop has not turned for %.0f s: the heartbeat stops, so this "
                    "process's work moves on to another within %.0f s",
                    self.stall_limit,
                    self.ttl,
                )
        if stalled:
            return None
        held = self.held()
        if not held.items and not held.threads:
            return None
        return heartbeat.beat(held, ttl=self.ttl)

    def _beat_forever(self, heartbeat: Heartbeat) -> None:
        interval = beat_interval(self.ttl)
        try:
            while not self._stop.wait(interval):
                try:
                    lost = self.beat(heartbeat)
                except StoreError as error:
                    _metrics.STORE_ERRORS.labels(where="lease").inc()
                    log.warning("the heartbeat could not renew this process's work: %s", error)
                    continue
                if lost is not None and (lost.items or lost.threads):
                    self._report_soon(lost)
        finally:
            heartbeat.close()

    def _report_soon(self, lost: Lost) -> None:
        loop = self._loop
        if loop is None:
            return
        # A closed loop: the process is ending anyway.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._report, lost)

    def _report(self, lost: Lost) -> None:
        """On the loop: what is still registered was taken by another process."""
        with self._lock:
            items = tuple(item for item in lost.items if item in self._items)
            self._items.difference_update(items)
            threads = tuple(
                lease
                for lease in lost.threads
                if (lease.channel, lease.thread_ts, lease.owner) in self._threads
            )
        for item in items:
            _metrics.WORK_TAKEN_OVER.labels(by="another").inc()
            log.warning("work item %s was taken over by another process", item)
        for lease in threads:
            log.warning(
                "the lease of thread %s/%s lapsed during a turn; another may overlap it",
                lease.channel,
                lease.thread_ts,
            )
        if (items or threads) and self.on_lost is not None:
            self.on_lost(Lost(items=items, threads=threads))

    async def _mark_turns(self) -> None:
        while True:
            self._turned = time.monotonic()
            await asyncio.sleep(min(_TURN_TICK, self.stall_limit / 4))
