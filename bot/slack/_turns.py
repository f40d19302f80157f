"""A thread's turns: one run at a time per thread, ordered by a lock within this process and
then by the store's thread lease across processes (taken, waited for, kept by the process's
heartbeat while the turn runs, released when it ends)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from state import ConversationStore, StoreError

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import ThreadLease, ThreadStop, ThreadTake

from .. import _logging
from ._liveness import Liveness

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
    take: ThreadTake | None = None
    """The store's last reply to taking the lease for `owner` (with the claim, or
    `take_thread`): whether it is held, and the thread's stop mark read with it."""

    @property
    def lease(self) -> ThreadLease:
        return ThreadLease(
            channel=self.thread.channel, thread_ts=self.thread.thread_ts, owner=self.owner
        )


@dataclass(kw_only=True)
class Slot:
    """A turn under way with the thread's lease held (what `ThreadTurns.turn` gives)."""

    stop: ThreadStop | None = None
    run_id: str | None = None
    """The run the thread points at from the turn's end (set once the run is saved): moved on
    with the release of the lease, in the same round trip."""
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

    def __init__(self, *, store: ConversationStore, liveness: Liveness) -> None:
        self.store = store
        self.liveness = liveness
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

    @property
    def lease_ttl(self) -> float:
        return self.liveness.ttl

    def leased(self, hold: TurnHold, take: ThreadTake) -> None:
        """Record `take`, the store's reply to taking the thread's lease for `hold.owner` (with
        a claim, or `take_thread`): once held, the process's heartbeat keeps it."""
        hold.take = take
        if take.held:
            self.liveness.hold_thread(hold.lease)

    def let_go(self, hold: TurnHold) -> None:
        """Give back a turn taken with `hold_turn()` that was not used for a resume (a lease it
        holds then lapses, or is taken again by the next turn of the same owner)."""
        self.liveness.drop_thread(hold.lease)
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
        return TurnHold(thread=thread, owner=uuid.uuid4().hex)

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
        holds it (at most the liveness TTL after that process dies); the process's heartbeat
        keeps it while the turn runs, and it is released when the turn ends."""
        thread, owner = hold.thread, hold.owner
        channel, thread_ts = thread.channel, thread.thread_ts
        wait = LEASE_RETRY_FIRST
        while hold.take is None or not hold.take.held:
            if hold.take is not None:
                log.debug("thread %s/%s is busy in another process; waiting", channel, thread_ts)
                await asyncio.sleep(wait)
                wait = min(wait * 2, LEASE_RETRY_MOST)
            # Who the turn is for is recorded with its lease: who may stop it (`StopCheck`).
            take = await self.store.take_thread(
                channel, thread_ts, owner=owner, ttl=self.lease_ttl, initiator=thread.requester
            )
            self.leased(hold, take)
        assert hold.take is not None
        try:
            slot = Slot(stop=hold.take.stop)
            yield slot
        finally:
            # Dropped from the heartbeat first: a beat that then finds it gone is no lapse.
            self.liveness.drop_thread(hold.lease)
            try:
                await self.store.release_thread(channel, thread_ts, owner=owner, run_id=slot.run_id)
            except StoreError:
                # The lease ends by itself within the liveness TTL. A thread that did not move
                # on to its run fails the work item, whose retry replays the run and moves it.
                log.warning("could not release the lease of thread %s/%s", channel, thread_ts)
                if slot.run_id is not None:
                    raise


def _key(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts
