"""A process's heartbeat, as the stores take it: one call that renews everything the process
holds (its inbox items, its threads' turns) for `ttl` seconds, made from a thread of the
process's own over a connection of its own, so how busy its event loop is never decides whether
it keeps its work. A process that stops beating loses all of it `ttl` seconds after its last
beat; nothing else ends a hold early."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ._errors import UsageError
from ._inbox import check_consumer, lease_seconds
from ._records import ThreadLease

__all__ = ["Heartbeat", "Held", "Lost", "check_held"]


@dataclass(frozen=True, kw_only=True)
class Held:
    """What one process holds, as it tells its heartbeat."""

    consumer: str
    """The inbox consumer its items were taken by (the process's name)."""
    items: tuple[str, ...] = ()
    """Inbox items it runs."""
    threads: tuple[ThreadLease, ...] = ()
    """Thread leases it holds (`run_id` is not read)."""


@dataclass(frozen=True, kw_only=True)
class Lost:
    """What a beat found no longer the process's: taken by another process after a lapse, or
    finished (an item done, a lease released) between the look at what it holds and the beat.
    Only the caller can tell the two apart."""

    items: tuple[str, ...] = field(default=())
    threads: tuple[ThreadLease, ...] = field(default=())


@runtime_checkable
class Heartbeat(Protocol):
    """A connection of its own to the store, for one thread (`Inbox.open_heartbeat()`); its
    calls block. A failure is a `StoreError`, and the next beat tries again."""

    def beat(self, held: Held, *, ttl: float) -> Lost:
        """Renew, for `ttl` seconds from now, every item still pending for `held.consumer` and
        every thread lease still held by its owner, in one atomic step (one script, one
        transaction); what was not renewed comes back."""
        ...

    def close(self) -> None:
        """Close the connection; closing twice is fine."""
        ...


def check_held(held: Held, ttl: float) -> float:
    if not isinstance(held, Held):
        raise UsageError(f"`held` must be a Held, got {held!r}")
    check_consumer(held.consumer)
    if not all(isinstance(lease, ThreadLease) and lease.owner for lease in held.threads):
        raise UsageError("every thread of `held` must be a ThreadLease with an owner")
    return lease_seconds(ttl)
