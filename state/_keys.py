"""Every Redis key name and every retention period of the stores, in one place.

Both stores keep records for the same time: Redis through key TTLs, SQLite through a
`keep_until` column that is pruned on open and by the periodic expiry sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._errors import UsageError

__all__ = [
    "AUDIT_CAP",
    "DEFAULT_PREFIX",
    "DELIVERY_TTL",
    "GRANT_GRACE",
    "HOME_VIEWER_CAP",
    "HOME_VIEWER_TTL",
    "INBOX_GROUP",
    "INTERACTION_GRACE",
    "LIVENESS_TTL",
    "LONGEST_WAIT",
    "PRUNE_EVERY",
    "RUN_TTL",
    "SETTLED_TTL",
    "STOP_TTL",
    "STREAM_TTL",
    "THREAD_TTL",
    "RedisKeys",
    "hash_tag",
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

LIVENESS_TTL = 15.0
"""Seconds a process keeps what it holds (its inbox items, its threads' turns) after its last
heartbeat (`Inbox.open_heartbeat`): how long a dead process's work waits for another, never how
long work may take. Every process on one store should use the same value."""

STOP_TTL = 3600
"""A stop mark outlives the turn it stopped by an hour: the retry of a turn whose process died
just after the stop finds it and does not carry on with the work."""

STREAM_TTL = DAY
"""Slack closes a stream nobody appended to within minutes; a day covers every retry."""

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

HOME_VIEWER_TTL = 7 * DAY
"""Someone who opened App Home gets their view refreshed when new requests wait on them for a
week after; past that they see the new ones the next time they open it."""

HOME_VIEWER_CAP = 1000
"""The most viewers kept (the latest ones): refreshing is a Slack call per viewer."""

GRANT_GRACE = DAY
"""A grant outlives its `expires_at` by a day, so a late revoke (or a look at it) reads
"expired" rather than "unknown"; no grant covers anything past `expires_at`."""

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
    """Key names under one prefix.

    On a Redis Cluster (`cluster=True`) every key starts with `namespace`, the prefix made a hash
    tag (`{hb:}run:<id>`), unless the prefix already holds one (`?prefix=app:{team-a}:`): one
    store's keys then live in one slot, so every script may touch any of them. A single Redis
    keeps the untagged names (`hb:run:<id>`) it has always had.
    """

    prefix: str = DEFAULT_PREFIX
    cluster: bool = False

    @property
    def namespace(self) -> str:
        """What every key starts with: the prefix, tagged on a cluster."""
        if not self.cluster or hash_tag(self.prefix):
            return self.prefix
        tagged = f"{{{self.prefix}}}"
        if not hash_tag(tagged):
            raise UsageError(f"the prefix {self.prefix!r} cannot be made a Redis Cluster hash tag")
        return tagged

    def run(self, run_id: str) -> str:
        """Hash: `rec` (the run's JSON), `status`, and `resumed_by` once claimed."""
        return f"{self.namespace}run:{run_id}"

    @property
    def transcripts(self) -> str:
        """Hash of every transcript log (layout 2), one key so that a script may read the log a
        record names without being given its key. Fields: `log:<name>` -> the log's number `n`
        (counted by `next`), `@<n>` -> its name, `#<n>` -> how many messages it holds, and
        `<n>:<pos>` -> the messages one save appended at `pos`, joined by newlines (compact
        JSON holds none). Positions are only ever added, never rewritten."""
        return f"{self.namespace}transcripts"

    @property
    def transcripts_keep(self) -> str:
        """Sorted set of log numbers scored by when the log may go (`RUN_TTL` after the last
        save of a run in it, so after every run that uses it): a hash field has no TTL of its
        own here, so each save deletes a few logs found past it."""
        return f"{self.namespace}transcripts-keep"

    def interaction(self, interaction_id: str) -> str:
        """Hash: `rec` (the JSON as added), `run_id`, `status`, `expires_at` and the fields set
        later."""
        return f"{self.namespace}ix:{interaction_id}"

    def run_interactions(self, run_id: str) -> str:
        """Sorted set of interaction ids scored by the order they were added to the run."""
        return f"{self.namespace}run-ix:{run_id}"

    @property
    def due(self) -> str:
        """Sorted set of pending interaction ids scored by `expires_at`."""
        return f"{self.namespace}due"

    @property
    def nudges(self) -> str:
        """Sorted set of pending approvals scored by when their next nudge is due: the reminder
        until it fired, then the escalation (`remind_at` / `escalate_at` in the interaction's
        hash); an approval with none left is not in it. Members found answered or closed are
        dropped when read."""
        return f"{self.namespace}nudges"

    @property
    def settled(self) -> str:
        """Sorted set (all scores 0, so ordered by id) of runs that had an interaction answered
        or closed; `claim_run` removes the run, `settled_runs` the ones found claimed, no longer
        paused or gone. Lives `SETTLED_TTL` after its last addition."""
        return f"{self.namespace}settled"

    def thread(self, channel: str, thread_ts: str) -> str:
        """String: the id of the thread's last run.

        `%` and `:` in the channel are escaped, so (`a:b`, `c`) and (`a`, `b:c`) stay two keys;
        Slack's channel ids have neither, so their keys read as written.
        """
        return f"{self.namespace}thread:{_thread_id(channel, thread_ts)}"

    def thread_lease(self, channel: str, thread_ts: str) -> str:
        """String with a PX TTL: the owner of the turn running in the thread, while it runs."""
        return f"{self.namespace}thread-lease:{_thread_id(channel, thread_ts)}"

    def thread_stop(self, channel: str, thread_ts: str) -> str:
        """String with a `STOP_TTL`: the last stop pressed in the thread (`ThreadStop` JSON)."""
        return f"{self.namespace}thread-stop:{_thread_id(channel, thread_ts)}"

    def thread_initiator(self, channel: str, thread_ts: str) -> str:
        """String with a `THREAD_TTL`: who started the thread's latest turn (a user id), written
        with the lease that turn took (`take_thread(initiator=...)`); who may stop it."""
        return f"{self.namespace}thread-initiator:{_thread_id(channel, thread_ts)}"

    def run_stream(self, run_id: str) -> str:
        """String with a `STREAM_TTL`: the ts of the message a run streams its answer into."""
        return f"{self.namespace}stream:{run_id}"

    # `{inbox}` is a hash tag: the stream and every dedupe mark hash to one slot, so the enqueue
    # script may write both. On a cluster the namespace's tag comes first and is the one Redis
    # reads, which puts the inbox in the store's slot with everything else.

    @property
    def inbox(self) -> str:
        """Stream of work items (fields `kind` and `body`), read through the `INBOX_GROUP`
        consumer group; an item leaves it when done (XACK + XDEL), so it never needs a TTL."""
        return f"{self.namespace}{{inbox}}:items"

    def inbox_seen(self, dedupe: str) -> str:
        """String set with NX and a `DELIVERY_TTL`: an item with this dedupe key was enqueued."""
        return f"{self.namespace}{{inbox}}:seen:{dedupe}"

    def grant(self, grant_id: str) -> str:
        """Hash with a TTL (`GRANT_GRACE` past its expiry): `rec` (the grant's JSON as added),
        `expires_at`, and `revoked_at` / `revoked_by` once revoked."""
        return f"{self.namespace}grant:{grant_id}"

    @property
    def grants(self) -> str:
        """Sorted set of every grant id scored by `expires_at`; entries long past it are
        dropped as grants are added."""
        return f"{self.namespace}grants"

    def grant_scope(self, tool: str, channel: str, thread_ts: str | None) -> str:
        """Sorted set of the ids of the grants for `tool` in that thread (or, with None, the
        whole channel), scored by `expires_at`: what a call there looks up."""
        where = _escape(tool) + ":" + _escape(channel) + ":" + _escape(thread_ts or "")
        return f"{self.namespace}grant-scope:{where}"

    @property
    def home_viewers(self) -> str:
        """Sorted set of user ids scored by when their last App Home visit stops counting;
        members past it are trimmed on each visit, the key lives as long as its newest."""
        return f"{self.namespace}home-viewers"

    @property
    def audit(self) -> str:
        """List of audit entries' JSON, newest at the head, trimmed to `AUDIT_CAP`."""
        return f"{self.namespace}audit"


def hash_tag(key: str) -> str:
    """The part of `key` a Redis Cluster hashes when it has one: between the first `{` and the
    first `}` after it, if not empty; else nothing (the whole key is hashed)."""
    start = key.find("{")
    if start < 0:
        return ""
    end = key.find("}", start + 1)
    return key[start + 1 : end] if end > start + 1 else ""


def _thread_id(channel: str, thread_ts: str) -> str:
    return f"{_escape(channel)}:{thread_ts}"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")
