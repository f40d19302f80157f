"""A thread's turns: one run at a time per thread, ordered by a lock within this process and
then by the store's thread lease across processes (taken, waited for, refreshed while the turn
runs, released or handed to the work item's `done`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from state import THREAD_LEASE_TTL, Store, StoreError, ThreadLease, ThreadStop, ThreadTake

from .. import _logging
from ._worker import hand_to_done, in_work_item, lease_handed_over

__all__ = ["Slot", "Thread", "ThreadTurns", "TurnHold"]

log = logging.getLogger("handback.slack")

LEASE_RETRY_FIRST = 0.02
"""Seconds before asking again for a thread's lease that another process holds; the wait
doubles up to `LEASE_RETRY_MOST`, so a short turn elsewhere delays this one by little."""

LEASE_RETRY_MOST = 0.2


@dataclass(kw_only=True)
class TurnHold:
    """A thread's turn taken in this process: its lock held, its lease owner chosen."""

    thread: Thread
    owner: str
    leased: bool = False
    """The store's lease was taken with a claim (`answer_and_claim`): it outlives the turn."""
    take: ThreadTake | None = None
    """The store's last reply to taking the lease for `owner` (with the claim, or
    `take_thread`): whether it is held, and the thread's stop mark read with it."""


@dataclass(kw_only=True)
class Slot:
    """A turn under way with the thread's lease held (what `ThreadTurns.turn` gives)."""

    deferred: bool
    """In a work item: where the thread points moves on with the lease's release."""
    run_id: str | None = None
    """The run the thread points at once the turn's lease is released, when deferred."""
    stop: ThreadStop | None = None
    """The thread's stop mark, read with the take that won the lease (with the claim, or
    `take_thread`)."""


@dataclass(kw_only=True, frozen=True)
class Thread:
    """Where a run talks: a channel, the thread's root ts, and who started the conversation."""

    channel: str
    thread_ts: str
    requester: str | None = None


class ThreadTurns:
    """The turns of every thread this process runs: its locks, and the store's leases."""

    def __init__(self, *, store: Store, lease_ttl: float = THREAD_LEASE_TTL) -> None:
        self.store = store
        self.lease_ttl = lease_ttl
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def hold_turn(self, thread: Thread) -> TurnHold | None:
        """The thread's turn in this process, taken now, before its lease in the store, or None
        when a turn of the thread runs (or waits) here already. Pass it to
        `Conversations.resume()` (which lets go of it) or to `let_go()`.

        Taken without waiting, so the lease that `answer_and_claim` takes with the answer (or a
        new turn with its first look at the stop mark, `Conversations._open_new_turn`) is always
        taken after the lock, in the order every turn takes them: a turn holding the lock never
        waits for a lease its own process took.
        """
        if _key(thread) in self._locks:
            return None
        return await self._hold(thread)

    def let_go(self, hold: TurnHold) -> None:
        """Give back a turn taken with `hold_turn()` that was not used for a resume."""
        lock, users = self._locks[_key(hold.thread)]
        lock.release()
        if users == 1:
            del self._locks[_key(hold.thread)]
        else:
            self._locks[_key(hold.thread)] = (lock, users - 1)

    async def _hold(self, thread: Thread) -> TurnHold:
        key = _key(thread)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
            raise
        # A lease this work item kept from an earlier turn in the thread is still its own.
        handed = lease_handed_over(thread.channel, thread.thread_ts)
        return TurnHold(thread=thread, owner=uuid.uuid4().hex if handed is None else handed.owner)

    @asynccontextmanager
    async def turn(self, thread: Thread, hold: TurnHold | None = None) -> AsyncIterator[Slot]:
        """One run at a time per thread: a resume and a new message in the same thread do not
        race. A lock orders this process's turns; the store's lease then orders them with other
        processes', so each turn continues from the run the previous one left. `hold` is the
        lock taken already (and maybe the lease, see `hold_turn`)."""
        _logging.bind(channel=thread.channel, thread=thread.thread_ts)
        if hold is None:
            hold = await self._hold(thread)
        try:
            async with self._lease(hold) as slot:
                yield slot
        finally:
            self.let_go(hold)

    @asynccontextmanager
    async def _lease(self, hold: TurnHold) -> AsyncIterator[Slot]:
        """Hold the thread's lease in the store for the turn, waiting while another process
        holds it (at most `lease_ttl` after that process dies), and refresh it as the turn runs.

        A lease taken with its claim (`hold_turn`, `answer_and_claim`) outlives the turn: the
        work item's `done` releases it and moves the thread on to the turn's run, in one round
        trip (`hand_to_done`), and a later turn of the same item in the thread takes it again as
        the same owner. Any other lease is released here.
        """
        thread, owner = hold.thread, hold.owner
        channel, thread_ts = thread.channel, thread.thread_ts
        handed = lease_handed_over(channel, thread_ts)
        # Only a turn whose lease came with its claim (and a later turn of the same item in that
        # thread) keeps it to the item's end: every other turn points the thread at its run as
        # soon as it is saved, so that a crash before the card is posted still finds it.
        deferred = in_work_item() and (hold.leased or handed is not None)
        wait = LEASE_RETRY_FIRST
        while hold.take is None or not hold.take.held:
            if hold.take is not None:
                log.debug("thread %s/%s is busy in another process; waiting", channel, thread_ts)
                await asyncio.sleep(wait)
                wait = min(wait * 2, LEASE_RETRY_MOST)
            # Who the turn is for is recorded with its lease: who may stop it (`StopCheck`).
            hold.take = await self.store.take_thread(
                channel, thread_ts, owner=owner, ttl=self.lease_ttl, initiator=thread.requester
            )
        slot = Slot(
            deferred=deferred,
            run_id=None if handed is None else handed.run_id,
            stop=hold.take.stop,
        )
        keeper = asyncio.create_task(self._keep_lease(thread, owner))
        try:
            yield slot
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            lease = ThreadLease(
                channel=channel, thread_ts=thread_ts, owner=owner, run_id=slot.run_id
            )
            if not (deferred and hand_to_done(lease)):
                try:
                    await self.store.release_thread(channel, thread_ts, owner=owner)
                except StoreError:
                    # The lease ends by itself within `lease_ttl`; the turn's work is done.
                    log.warning("could not release the lease of thread %s/%s", channel, thread_ts)

    async def _keep_lease(self, thread: Thread, owner: str) -> None:
        """Extend the lease three times per TTL, so a long turn keeps it and a dead one loses it."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                kept = await self.store.acquire_thread(
                    thread.channel, thread.thread_ts, owner=owner, ttl=self.lease_ttl
                )
            except StoreError:
                log.warning("could not refresh the lease of thread %s/%s", *_where(thread))
                continue
            if not kept:
                log.warning(
                    "the lease of thread %s/%s expired during a turn; another may overlap it",
                    *_where(thread),
                )


def _key(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts


def _where(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts
