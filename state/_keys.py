"""Every Redis key name and every retention period of the stores, in one place.

Both stores keep records for the same time: Redis through key TTLs, SQLite through a
`keep_until` column that is pruned on open and by the periodic expiry sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AUDIT_CAP",
    "DEFAULT_PREFIX",
    "DELIVERY_TTL",
    "INBOX_GROUP",
    "INTERACTION_GRACE",
    "LONGEST_WAIT",
    "PRUNE_EVERY",
    "RUN_TTL",
    "SETTLED_TTL",
    "THREAD_LEASE_TTL",
    "THREAD_TTL",
    "RedisKeys",
    "interaction_ttl",
]

DAY = 24 * 3600

DEFAULT_PREFIX = "hb:"
"""Namespace of every key; a URL's `?prefix=` replaces it, so several apps can share a DB."""

RUN_TTL = 30 * DAY
"""A thread can be continued (or a paused run resumed) for a month after its last save; older
conversations start afresh rather than keep a transcript in memory forever. Refreshed on save."""

THREAD_TTL = RUN_TTL
"""A thread points at its last run, so it lives exactly as long as that run does."""

THREAD_LEASE_TTL = 60.0
"""A thread's turns run one at a time across processes under a lease this long (seconds). The
holder refreshes it while the turn runs, so it only bounds how long a crashed process blocks
its thread; a turn is never cut short by it."""

INTERACTION_GRACE = 7 * DAY
"""An interaction outlives its `expires_at` by a week, so a late click still reads "expired"
(not "unknown") and the expiry sweep has ample time to close it and cancel the run."""

LONGEST_WAIT = 3650 * DAY
"""An interaction that expires later than this (a configured TTL of `1e20`, in effect never) is
kept as if it expired then: Redis refuses a TTL of more than about 292 million years, and a
card nobody answers for ten years waits for no one."""

SETTLED_TTL = RUN_TTL
"""Runs listed as settled cannot outlive their own records, so the index lives no longer."""

DELIVERY_TTL = 3600
"""Slack retries an event three times within minutes; an hour covers every retry with margin."""

INBOX_GROUP = "workers"
"""The one consumer group of the inbox stream: every process takes from it, so each item is
leased to one consumer at a time (a name, not a key)."""

AUDIT_CAP = 10_000
"""The audit log keeps the newest entries only: it is for people reading recent activity."""

PRUNE_EVERY = 3600
"""SQLite has no TTLs, so expired rows are deleted at most this often (seconds)."""


def interaction_ttl(expires_at: float, now: float) -> int:
    """Seconds to keep an interaction: until it expires (`LONGEST_WAIT` at most), plus the grace
    period."""
    return int(min(max(expires_at - now, 0.0), LONGEST_WAIT)) + INTERACTION_GRACE


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """Key names under one prefix."""

    prefix: str = DEFAULT_PREFIX

    @property
    def run_prefix(self) -> str:
        """Lua scripts that read the run of an interaction append its id to this."""
        return f"{self.prefix}run:"

    def run(self, run_id: str) -> str:
        """Hash: `rec` (the run's JSON), `status`, and `resumed_by` once claimed."""
        return f"{self.run_prefix}{run_id}"

    @property
    def interaction_prefix(self) -> str:
        """Lua scripts that read many interactions append ids to this."""
        return f"{self.prefix}ix:"

    def interaction(self, interaction_id: str) -> str:
        """Hash: `rec` (the JSON as added), `run_id`, `status`, `expires_at` and the fields set
        later."""
        return f"{self.interaction_prefix}{interaction_id}"

    @property
    def run_interactions_prefix(self) -> str:
        """Lua scripts that list a run's interactions append its id to this."""
        return f"{self.prefix}run-ix:"

    def run_interactions(self, run_id: str) -> str:
        """Sorted set of interaction ids scored by the order they were added to the run."""
        return f"{self.run_interactions_prefix}{run_id}"

    @property
    def due(self) -> str:
        """Sorted set of pending interaction ids scored by `expires_at`."""
        return f"{self.prefix}due"

    @property
    def settled(self) -> str:
        """Sorted set (all scores 0, so ordered by id) of paused, unclaimed runs that have an
        interaction answered or closed; `claim_run` removes the run, `settled_runs` stale ones.
        Lives `SETTLED_TTL` after its last addition."""
        return f"{self.prefix}settled"

    def thread(self, channel: str, thread_ts: str) -> str:
        """String: the id of the thread's last run.

        `%` and `:` in the channel are escaped, so (`a:b`, `c`) and (`a`, `b:c`) stay two keys;
        Slack's channel ids have neither, so their keys read as written.
        """
        return f"{self.prefix}thread:{_thread_id(channel, thread_ts)}"

    def thread_lease(self, channel: str, thread_ts: str) -> str:
        """String with a PX TTL: the owner of the turn running in the thread, while it runs."""
        return f"{self.prefix}thread-lease:{_thread_id(channel, thread_ts)}"

    def delivery(self, event_id: str) -> str:
        """String set with NX: its existence means the event was already handled."""
        return f"{self.prefix}event:{event_id}"

    # `{inbox}` is a hash tag: on a Redis Cluster the stream and every dedupe mark hash to one
    # slot, so the enqueue script may write both. One slot for the whole inbox is by design: it is
    # one queue, and a stream cannot be split across slots anyway.

    @property
    def inbox(self) -> str:
        """Stream of work items (fields `kind` and `body`), read through the `INBOX_GROUP`
        consumer group; an item leaves it when done (XACK + XDEL), so it never needs a TTL."""
        return f"{self.prefix}{{inbox}}:items"

    def inbox_seen(self, dedupe: str) -> str:
        """String set with NX and a `DELIVERY_TTL`: an item with this dedupe key was enqueued."""
        return f"{self.prefix}{{inbox}}:seen:{dedupe}"

    @property
    def audit(self) -> str:
        """List of audit entries' JSON, newest at the head, trimmed to `AUDIT_CAP`."""
        return f"{self.prefix}audit"


def _thread_id(channel: str, thread_ts: str) -> str:
    escaped = channel.replace("%", "%25").replace(":", "%3A")
    return f"{escaped}:{thread_ts}"
