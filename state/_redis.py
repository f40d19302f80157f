"""The Redis store: one hash per run and per interaction, claims as Lua scripts (one round trip).

Fields that change after a write (`resumed_by`, an interaction's status and answer, where its
card was posted) live beside the record's JSON in the same hash, so a script can check and set
them atomically without decoding and re-encoding the JSON in Lua (cjson would turn `[]` into
`{}` and round floats to 14 digits).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException

from ._beat import Heartbeat
from ._codec import (
    INTERACTION_OVERLAY,
    check_interaction_times,
    check_now,
    decode_audit,
    decode_interaction,
    decode_run,
    decode_stop,
    encode_audit,
    encode_interaction,
    encode_run,
    encode_stop,
    inline,
    lease_millis,
    own_messages,
    text,
)
from ._errors import CorruptRecordError, StoreClosedError, StoreError, StoreURLError, UsageError
from ._keys import (
    AUDIT_CAP,
    DEFAULT_PREFIX,
    HOME_VIEWER_CAP,
    INTERACTION_GRACE,
    LONGEST_WAIT,
    RUN_TTL,
    STOP_TTL,
    STREAM_TTL,
    THREAD_TTL,
    RedisKeys,
    interaction_ttl,
)
from ._nudges import nudge_delays, nudge_times, unfired
from ._records import (
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    RunClaim,
    RunRecord,
    StopGuard,
    ThreadStop,
    ThreadTake,
)
from ._redis_answers import RedisAnswers
from ._redis_beat import RedisHeartbeat, sync_client
from ._redis_cluster import CallGate, RedisClient, open_cluster
from ._redis_grants import RedisGrants
from ._redis_inbox import RedisInbox
from ._redis_ix import IX_FIELDS as _IX_FIELDS
from ._redis_ix import LUA_READ_IX as _READ_IX
from ._redis_log import LOG_PLACEHOLDER as _LOG_PLACEHOLDER
from ._redis_log import LUA_READ_LOG as _READ_LOG
from ._redis_log import SAVE_APPENDED as _SAVE_APPENDED
from ._redis_log import decode_loaded as _decode_loaded
from ._redis_mark import MarkWriter
from ._redis_nudges import LUA_SCHEDULE as _SCHEDULE
from ._redis_nudges import RedisNudges
from ._redis_resume import RedisResumes
from ._redis_stops import LUA_STOP_FIRST as _STOP_FIRST
from ._redis_stops import LUA_STOPPED_SINCE as _STOPPED_SINCE
from ._redis_stops import stopped_reply
from ._url import mask_url, redis_options, store_kind

__all__ = ["RedisStore"]

_CONNECTION_RETRIES = 2
"""A call that meets a dead connection is tried again this often, each on a fresh one."""

_T = TypeVar("_T")

_SAVE_RUN = """
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'status', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[1], 'resumed_by', ARGV[3]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

_LOAD_RUN = (
    _READ_LOG
    + r"""
local v = redis.call('HMGET', KEYS[1], 'rec', 'resumed_by')
if not v[1] then return {} end
local log = read_log(v[1], KEYS[2])
if not log then return {v[1], v[2]} end
return {v[1], v[2], log[1], log[2]}
"""
)

# Won again by the child that holds the claim: a retried work item resumes with the same derived
# child id and must carry on with what it started. Any other child loses.
# KEYS: run, settled, and with a stop guard the thread's stop mark: an unclaimed run whose turn
# was stopped since it began is not claimed ({0, rec, false, mark}).
_CLAIM_RUN = (
    _STOPPED_SINCE
    + """
local v = redis.call('HMGET', KEYS[1], 'rec', 'status', 'resumed_by')
if not v[1] then return {0} end
if v[2] == 'paused' and not v[3] and KEYS[3] then
  local mark = stopped_since(KEYS[1], KEYS[3])
  if mark then return {0, v[1], false, mark} end
end
if v[2] == 'paused' and (not v[3] or v[3] == ARGV[1]) then
  redis.call('HSET', KEYS[1], 'resumed_by', ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return {1, v[1], ARGV[1]}
end
return {0, v[1], v[3]}
"""
)

# KEYS: due, nudges, then (interaction, run index) per record; ARGV: now, LONGEST_WAIT,
# INTERACTION_GRACE, RUN_TTL, then twelve values per record. A pending record added again (a run
# paused again on it) is the new record with the stored one's `created_at`, `expires_at` and
# `message_ts`: its card stays, and its deadline, reminder and escalation do not move (the nudges
# fire once per request, not once per pause). The new record comes without those three (`body`,
# its JSON with them at their default, so left out) and the script appends the stored ones as
# text: `expires_at` as Python wrote it, `created_at` read back and written with 17 digits (the
# same double), the card's ts as its overlay holds it or else as its JSON does. A stored record
# whose JSON does not read (corrupt) is replaced as given. Returns, per record, 0 when the id was
# new (stored as given) or else the stored fields after the add (`read_ix`), so the caller knows
# which cards exist and which requests were already answered without a read of its own.
_ADD_INTERACTIONS = (
    _SCHEDULE
    + _READ_IX
    + """
local now, longest, grace, run_ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
                                     tonumber(ARGV[4])
local function exact(x) return string.format('%.17g', x) end
local function finite(x) return x == x and x ~= math.huge and x ~= -math.huge end
local function created_of(rec)
  local ok, stored = pcall(cjson.decode, rec)
  if not ok or type(stored) ~= 'table' then return nil end
  local created = stored.created_at
  if created == nil then created = 0 end
  if type(created) ~= 'number' or not finite(created) then return nil end
  local ts = stored.message_ts
  if type(ts) ~= 'string' then ts = nil end
  return created, ts
end
local out = {}
for i = 0, (#KEYS - 2) / 2 - 1 do
  local ix, runix, a = KEYS[3 + 2 * i], KEYS[4 + 2 * i], 4 + 12 * i
  local id, rec, status, exp = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local ttl, keep_run, remind, escalate = ARGV[a + 5], ARGV[a + 6], ARGV[a + 8], ARGV[a + 9]
  local v = redis.call('HMGET', ix, 'status', 'rec', 'expires_at', 'message_ts', 'reminded_at',
                       'escalated_at')
  local current = v[1]
  if current == 'pending' and v[2] then
    local created, ts = created_of(v[2])
    local kept_exp = v[3] and tonumber(v[3])
    if created and kept_exp and finite(kept_exp) then
      if v[4] then ts = v[4] end
      exp = v[3]
      rec = string.sub(ARGV[a + 10], 1, -2) .. ',"created_at":' .. exact(created)
            .. ',"expires_at":' .. exp
      if ts then rec = rec .. ',"message_ts":' .. cjson.encode(ts) end
      rec = rec .. '}'
      ttl = math.floor(math.min(math.max(kept_exp - now, 0), longest)) + grace
      keep_run = math.max(ttl, run_ttl)
      remind, escalate = '', ''
      if ARGV[a + 11] ~= '' then
        local r, e = created + tonumber(ARGV[a + 11]), nil
        if ARGV[a + 12] ~= '' then e = r + tonumber(ARGV[a + 12]) end
        if finite(r) and (e == nil or finite(e)) then
          remind = exact(r)
          if e ~= nil then escalate = exact(e) end
        end
      end
    end
  end
  if not current or current == 'pending' then
    redis.call('DEL', ix)
    redis.call('HSET', ix, 'rec', rec, 'status', status, 'expires_at', exp, 'run_id', ARGV[a + 7])
    if remind ~= '' then redis.call('HSET', ix, 'remind_at', remind) end
    if escalate ~= '' then redis.call('HSET', ix, 'escalate_at', escalate) end
    if v[5] then redis.call('HSET', ix, 'reminded_at', v[5]) end
    if v[6] then redis.call('HSET', ix, 'escalated_at', v[6]) end
    redis.call('EXPIRE', ix, ttl)
    if status == 'pending' then
      redis.call('ZADD', KEYS[1], exp, id)
    else
      redis.call('ZREM', KEYS[1], id)
    end
    schedule(ix, KEYS[2], id)
    redis.call('ZADD', runix, 'NX', redis.call('ZCARD', runix), id)
    redis.call('EXPIRE', runix, keep_run)
  end
  if current then out[i + 1] = read_ix(ix) else out[i + 1] = 0 end
end
return out
"""
)

_SET_MESSAGE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'channel', ARGV[1], 'message_ts', ARGV[2])
return 1
"""

# The scripts below read keys an index names. Every key a script touches is passed in KEYS (on a
# cluster they must be, and in one slot), so the index is read first, in a call of its own.

# KEYS: hashes; ARGV: fields. The fields of each hash, in one consistent read.
_HMGET_MANY = """
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HMGET', key, unpack(ARGV)) end
return out
"""

# KEYS: home viewers; ARGV: user, until, now, cap. Scores are when a mark runs out, so the
# newest marks rank last and the oldest go first when the cap is passed.
_HOME_OPENED = """
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[4]) - 1)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then redis.call('EXPIREAT', KEYS[1], math.ceil(tonumber(last[2]))) end
return 1
"""

# KEYS: due, then the interactions; ARGV: their ids. Members whose hash has expired (TTL) are
# dropped from `due` on the way.
_DUE_READ = (
    _READ_IX
    + """
local out = {}
for i = 2, #KEYS do
  local v = read_ix(KEYS[i])
  if v[1] then
    out[#out + 1] = ARGV[i - 1]; out[#out + 1] = v
  else
    redis.call('ZREM', KEYS[1], ARGV[i - 1])
  end
end
return out
"""
)

# KEYS: (run, run index) per run. Each run's status, claim and interaction ids.
_RUNS_READ = """
local out = {}
for i = 1, #KEYS, 2 do
  local r = redis.call('HMGET', KEYS[i], 'status', 'resumed_by')
  out[#out + 1] = {r[1], r[2], redis.call('ZRANGE', KEYS[i + 1], 0, -1)}
end
return out
"""

# KEYS: settled, then runs; ARGV: their ids. Drops the runs that are (still) gone, claimed or no
# longer paused: checked again here, since a run read as stale may have been paused since.
_DROP_STALE = """
local dropped = 0
for i = 2, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'status', 'resumed_by')
  if r[1] ~= 'paused' or r[2] then
    dropped = dropped + redis.call('ZREM', KEYS[1], ARGV[i - 1])
  end
end
return dropped
"""

# A script rather than a MULTI pipeline: atomic and one round trip on a single Redis and on a
# cluster alike.
_AUDIT = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], 0, ARGV[2] - 1)
return 1
"""

# Taken when free (expired keys are gone) or already the owner's, which extends it.
_ACQUIRE_THREAD = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: the thread's lease, its stop mark, its initiator. ARGV: owner, lease ms, initiator (empty:
# none), initiator TTL. `_ACQUIRE_THREAD`, and the stop mark read with it; a won lease records
# who started the turn, so a stop is checked against the turn it would end.
_TAKE_THREAD = """
local stop = redis.call('GET', KEYS[2])
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {0, stop} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '' then redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4]) end
return {1, stop}
"""

# KEYS: the thread's lease, the thread; ARGV: the owner, the run it moves on to ('' for none),
# the thread's TTL. The thread moves on with the release, in the same round trip.
_RELEASE_THREAD = """
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_SETTLED_BATCH = 100
"""Runs of the settled index read per batch (three round trips, a fourth to drop stale ones)."""


class RedisStore(RedisAnswers, RedisNudges, RedisInbox, RedisGrants, RedisResumes):
    """`Store` on Redis (redis-py's asyncio client); every call is one round trip.

    Build it with `RedisStore.from_url(url)` (a `?prefix=` query names the key namespace) or
    around a client of your own with `RedisStore(client, prefix=...)`; use it as an async context
    manager or call `aclose()`.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        prefix: str = DEFAULT_PREFIX,
        owns_client: bool = False,
        name: str = "redis",
        gate: CallGate | None = None,
        url: str | None = None,
    ) -> None:
        self._client = client
        self._url = url
        """The URL it was opened from (`from_url`), for the heartbeat's client of its own."""
        try:
            self._keys = RedisKeys(prefix, cluster=isinstance(client, aioredis.RedisCluster))
            self._keys.namespace  # noqa: B018 - a prefix that cannot be tagged fails here
        except ValueError as exc:
            raise StoreURLError(str(exc)) from None
        self._owns_client = owns_client
        self._closed = False
        self._name = name
        self._gate = gate
        self._calls = 0
        """Calls in `_send` right now: in flight, or waiting for a connection."""
        self._connections = _connections(client, gate)
        # register_script hashes once; the server learns each script on its first EVALSHA miss.
        self._save_run = client.register_script(_SAVE_RUN)
        self._save_appended = client.register_script(_SAVE_APPENDED)
        self._load_run = client.register_script(_LOAD_RUN)
        self._claim_run = client.register_script(_CLAIM_RUN)
        self._save_run_guarded = client.register_script(_STOP_FIRST + _SAVE_RUN)
        self._save_appended_guarded = client.register_script(_STOP_FIRST + _SAVE_APPENDED)
        self._add = client.register_script(_ADD_INTERACTIONS)
        self._set_message = client.register_script(_SET_MESSAGE)
        self._hmget_many = client.register_script(_HMGET_MANY)
        self._due_read = client.register_script(_DUE_READ)
        self._runs_read = client.register_script(_RUNS_READ)
        self._drop_stale = client.register_script(_DROP_STALE)
        self._audit = client.register_script(_AUDIT)
        self._home_opened = client.register_script(_HOME_OPENED)
        self._acquire_thread = client.register_script(_ACQUIRE_THREAD)
        self._take_thread = client.register_script(_TAKE_THREAD)
        self._release_thread = client.register_script(_RELEASE_THREAD)
        self._register_answers(client)
        self._register_nudges(client)
        self._register_inbox(client)
        self._register_grants(client)
        self._register_resumes(client)
        self._marks: MarkWriter | None = None
        if not self._keys.cluster:
            # A Redis Cluster keeps the async path: which node to ask is the async client's.
            self._marks = MarkWriter(self._sync_client)

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`redis://`, `rediss://`, `unix://`, or a Redis Cluster's `redis+cluster://` and
        `rediss+cluster://` (any one node; the others are discovered), with an optional
        `?prefix=` (default `hb:`) and the connection pool's `?pool_size=` (default 64) and
        `?pool_timeout=` (seconds, 10).

        The pool blocks: a call past `pool_size` connections in use waits up to `pool_timeout`
        for one to come back, so a burst is served late rather than lost. On a cluster
        `pool_size` bounds the calls in flight, hence the connections to each node. Other query
        parameters go to redis-py.
        """
        if store_kind(url) != "redis":
            raise StoreURLError(
                f"`{mask_url(url)}` is not a redis://, rediss://, unix:// or redis+cluster:// URL"
            )
        options = redis_options(url)
        prefix = options.prefix or DEFAULT_PREFIX
        name = mask_url(url)
        if options.cluster:
            cluster, gate = open_cluster(url, options)
            return cls(cluster, prefix=prefix, owns_client=True, name=name, gate=gate, url=url)
        try:
            pool = aioredis.BlockingConnectionPool.from_url(
                options.client_url,
                max_connections=options.pool_size,
                timeout=options.pool_timeout,
                # After a Redis restart every pooled connection is dead; without a retry each
                # one would fail one call (a refused request) before being replaced. A command
                # that may have run twice is safe here: the inbox de-duplicates events and the
                # claims are idempotent for their holder.
                retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), _CONNECTION_RETRIES),
                retry_on_error=[RedisConnectionError],
            )
        except ValueError as exc:
            raise StoreURLError(f"`{mask_url(url)}` is not a usable Redis URL: {exc}") from exc
        # from_pool: the client owns the pool and disconnects it when closed.
        client = aioredis.Redis.from_pool(pool)
        return cls(client, prefix=prefix, owns_client=True, name=name, url=url)

    def __repr__(self) -> str:
        cluster = ", cluster=True" if self._keys.cluster else ""
        return f"RedisStore({self._name!r}, prefix={self._keys.prefix!r}{cluster})"

    @property
    def prefix(self) -> str:
        return self._keys.prefix

    @property
    def cluster(self) -> bool:
        """On a Redis Cluster: every key then carries the prefix as its hash tag."""
        return self._keys.cluster

    async def __aenter__(self) -> Self:
        """Checks the server answers, so a wrong URL fails at start-up, not on the first click."""
        try:
            await self._live().ping()
        except (aioredis.RedisError, RedisClusterException) as exc:
            await self.aclose()
            raise StoreError(f"cannot reach Redis at `{self._name}`: {exc}") from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._marks is not None:
            self._marks.close()
        if self._owns_client:
            await self._client.aclose()

    def _sync_client(self, timeout: float) -> redis.Redis:
        sync = sync_client(self._live(), self._url, timeout=timeout)
        assert isinstance(sync, redis.Redis)  # not a cluster (`__init__`)
        return sync

    def _live(self) -> RedisClient:
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed")
        return self._client

    def open_heartbeat(self) -> Heartbeat:
        """A synchronous client of its own (`RedisHeartbeat`), not one of the pool's."""
        return RedisHeartbeat(sync_client(self._live(), self._url), self._keys)

    @property
    def calls_waiting(self) -> int:
        """Calls waiting for one of the `pool_size` connections (or cluster places), and inbox
        writes until their group commit ends: a burst's acks wait for those."""
        return max(0, self._calls - self._connections) + self._enqueues.waiting

    async def _send(self, call: Awaitable[_T]) -> _T:
        """Await one round trip; a server that went away (or refused) is a `StoreError`.

        redis-py has already retried the connection by then, and a script the server forgot
        (NOSCRIPT, after a restart or `SCRIPT FLUSH`) was loaded again. A write whose reply was
        lost may still have happened: a claim that fails this way counts as neither won nor lost.
        """
        self._calls += 1
        try:
            if self._gate is not None:
                return await self._gate.run(call)
            return await call
        except (aioredis.RedisError, RedisClusterException) as exc:
            raise StoreError(f"Redis at `{self._name}` failed: {exc}") from exc
        finally:
            self._calls -= 1

    # Runs

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        """Insert or replace the run; a `resumed_by` already stored is kept (claims are final).

        With `then` (the journal's started mark) the scripts are sent from the loop's thread,
        which waits for their reply, and `then()` is called right after it (`MarkWriter`); on a
        Redis Cluster, in the step of this task that reads the reply.
        """
        if then is not None and self._marks is not None:
            self._live()
            try:
                saved = self._save_run_marked(self._marks, run, stop)
            except redis.RedisError as exc:
                raise StoreError(f"Redis at `{self._name}` failed: {exc}") from exc
        else:
            saved = await self._save_run_once(run, stop)
        if saved and then is not None:
            then()
        return saved

    def _save_run_marked(self, marks: MarkWriter, run: RunRecord, stop: StopGuard | None) -> bool:
        """`_save_run_once` through `marks`, blocking."""
        guarded = stop is not None
        if run.layout == 2:
            saved = marks.run(
                _STOP_FIRST + _SAVE_APPENDED if guarded else _SAVE_APPENDED,
                *self._appended_call(run, stop),
            )
            if saved == -1:
                return False
            if saved:
                return True
            inline(run)
        saved = marks.run(
            _STOP_FIRST + _SAVE_RUN if guarded else _SAVE_RUN, *self._inline_call(run, stop)
        )
        return bool(saved != -1)

    def _guard(self, stop: StopGuard | None, run: RunRecord) -> tuple[list[str], list[str]]:
        if stop is None:
            return [], []
        return [self._keys.thread_stop(stop.channel, stop.thread_ts)], [run.stop_seen or ""]

    def _appended_call(self, run: RunRecord, stop: StopGuard | None) -> tuple[list[str], list[Any]]:
        """The keys and arguments of `_SAVE_APPENDED` for `run` (layout 2)."""
        guard_keys, guard_args = self._guard(stop, run)
        rec = encode_run(run, log=0)
        if not rec.startswith(_LOG_PLACEHOLDER):
            raise AssertionError("a layout-2 record must start with its log number")
        keys = [
            self._keys.run(run.run_id),
            self._keys.transcripts,
            self._keys.transcripts_keep,
            *guard_keys,
        ]
        args = [
            run.transcript_id or "",
            rec,
            run.status,
            run.resumed_by or "",
            RUN_TTL,
            run.base,
            *own_messages(run),
            *guard_args,
        ]
        return keys, args

    def _inline_call(self, run: RunRecord, stop: StopGuard | None) -> tuple[list[str], list[Any]]:
        """The keys and arguments of `_SAVE_RUN` for `run` (its transcript inline)."""
        guard_keys, guard_args = self._guard(stop, run)
        keys = [self._keys.run(run.run_id), *guard_keys]
        args = [encode_run(run), run.status, run.resumed_by or "", RUN_TTL, *guard_args]
        return keys, args

    async def _save_run_once(self, run: RunRecord, stop: StopGuard | None) -> bool:
        """`save_run` but for `then`.

        Layout 2 appends the run's new messages to its transcript log in the same script. When
        the log holds other messages where this run's belong, the run is saved as layout 1 (its
        transcript inline) instead, and `run` says so from then on. With `stop` the same scripts
        run after the stop check (`LUA_STOP_FIRST`).
        """
        save_appended, save_inline = self._save_appended, self._save_run
        if stop is not None:
            save_appended, save_inline = self._save_appended_guarded, self._save_run_guarded
        if run.layout == 2:
            keys, args = self._appended_call(run, stop)
            saved = await self._send(save_appended(keys=keys, args=args, client=self._live()))
            if saved == -1:
                return False
            if saved:
                return True
            inline(run)
        keys, args = self._inline_call(run, stop)
        saved = await self._send(save_inline(keys=keys, args=args, client=self._live()))
        return bool(saved != -1)

    async def load_run(self, run_id: str) -> RunRecord | None:
        """One round trip: the record and, for layout 2, its transcript from the log."""
        key = self._keys.run(run_id)
        reply = await self._send(
            self._load_run(keys=[key, self._keys.transcripts], args=[], client=self._live())
        )
        if not reply:
            return None
        return _decode_loaded(key, run_id, reply)

    async def claim_run(
        self, run_id: str, *, child_id: str, stop: StopGuard | None = None, read: bool = False
    ) -> RunClaim:
        if not child_id:
            raise UsageError("`child_id` must be a non-empty run id")
        if read:
            if stop is not None:
                raise UsageError("a claim with `read` checks the run's own stop: give no `stop`")
            return await self._claim_read(run_id, child_id)
        key = self._keys.run(run_id)
        keys = [key, self._keys.settled]
        stop_key = ""
        if stop is not None:
            stop_key = self._keys.thread_stop(stop.channel, stop.thread_ts)
            keys.append(stop_key)
        reply = await self._send(
            self._claim_run(keys=keys, args=[child_id, run_id], client=self._live())
        )
        if len(reply) == 1:
            return RunClaim(won=False, run=None)
        run = decode_run(reply[1], key=key, run_id=run_id, resumed_by=reply[2])
        stopped = stopped_reply(reply, 3, key=stop_key)
        return RunClaim(won=bool(reply[0]), run=run, stopped=stopped)

    # Interactions

    def _decode_ix(self, interaction_id: str, values: Sequence[Any]) -> InteractionRecord:
        key = self._keys.interaction(interaction_id)
        if len(values) != len(_IX_FIELDS) or values[0] is None:
            raise CorruptRecordError(key, "interaction", "its hash has no `rec` field")
        overlay = dict(zip(INTERACTION_OVERLAY, values[1:], strict=True))
        return decode_interaction(
            values[0], key=key, interaction_id=interaction_id, overlay=overlay
        )

    def _decode_many(self, reply: Sequence[Any]) -> list[InteractionRecord]:
        return [self._decode_ix(text(reply[i]), reply[i + 1]) for i in range(0, len(reply), 2)]

    async def add_interactions(self, records: list[InteractionRecord]) -> list[InteractionRecord]:
        """Insert records; an id already stored is replaced only while it is still pending, and
        then keeps its card, deadline and nudges (`_ADD_INTERACTIONS`). Returns each as stored."""
        if not records:
            return []
        now = time.time()
        keys = [self._keys.due, self._keys.nudges]
        args: list[str | bytes | int] = [repr(now), LONGEST_WAIT, INTERACTION_GRACE, RUN_TTL]
        added: list[InteractionRecord] = []
        for record in records:
            check_interaction_times(record)
            record = unfired(record)
            added.append(record)
            remind_at, escalate_at = nudge_times(record)
            remind_after, escalation_delay = nudge_delays(record) or (None, None)
            keys += [
                self._keys.interaction(record.interaction_id),
                self._keys.run_interactions(record.run_id),
            ]
            ttl = interaction_ttl(record.expires_at, now)
            args += [
                record.interaction_id,
                encode_interaction(record),
                record.status,
                repr(record.expires_at),
                ttl,
                max(ttl, RUN_TTL),
                record.run_id,
                _time_arg(remind_at),
                _time_arg(escalate_at),
                encode_interaction(
                    dataclasses.replace(record, created_at=0.0, expires_at=0.0, message_ts=None)
                ),
                _time_arg(remind_after),
                _time_arg(escalation_delay),
            ]
        reply = await self._send(self._add(keys=keys, args=args, client=self._live()))
        return [
            record if stored == 0 else self._decode_ix(record.interaction_id, stored)
            for record, stored in zip(added, reply, strict=True)
        ]

    async def get_interaction(self, interaction_id: str) -> InteractionRecord | None:
        key = self._keys.interaction(interaction_id)
        values = await self._send(self._live().hmget(key, _IX_FIELDS))
        if values[0] is None:
            return None
        return self._decode_ix(interaction_id, values)

    async def run_interactions(self, run_id: str) -> list[InteractionRecord]:
        """The run's interactions in the order added; ids since re-added by a later run are not."""
        index = self._keys.run_interactions(run_id)
        ids = [text(i) for i in await self._send(self._live().zrange(index, 0, -1))]
        if not ids:
            return []
        values = await self._send(
            self._hmget_many(
                keys=[self._keys.interaction(i) for i in ids], args=_IX_FIELDS, client=self._live()
            )
        )
        records = [
            self._decode_ix(i, v) for i, v in zip(ids, values, strict=True) if v[0] is not None
        ]
        return [record for record in records if record.run_id == run_id]

    async def set_message(self, interaction_id: str, *, channel: str, message_ts: str) -> None:
        """Record where the card was posted; nothing happens when the interaction is gone."""
        await self._send(
            self._set_message(
                keys=[self._keys.interaction(interaction_id)],
                args=[channel, message_ts],
                client=self._live(),
            )
        )

    def _interaction_claim(self, interaction_id: str, reply: Sequence[Any]) -> InteractionClaim:
        if len(reply) == 1:
            return InteractionClaim(won=False, record=None)
        record = self._decode_ix(interaction_id, reply[1])
        return InteractionClaim(won=bool(reply[0]), record=record)

    async def due_interactions(self, now: float, *, limit: int = 100) -> list[InteractionRecord]:
        check_now(now)
        if limit <= 0:
            return []
        due = self._live().zrangebyscore(self._keys.due, "-inf", repr(float(now)), 0, limit)
        ids = [text(i) for i in await self._send(due)]
        if not ids:
            return []
        reply = await self._send(
            self._due_read(
                keys=[self._keys.due, *(self._keys.interaction(i) for i in ids)],
                args=ids,
                client=self._live(),
            )
        )
        return [record for record in self._decode_many(reply) if record.status == "pending"]

    async def pending_count(self) -> int:
        """ZCARD of `due`: an answer or a close removes the interaction from it."""
        return int(await self._send(self._live().zcard(self._keys.due)))

    async def pending_interactions(self, *, limit: int = 100) -> list[InteractionRecord]:
        """`due` holds exactly the pending ones, scored by `expires_at`."""
        if limit <= 0:
            return []
        ids = [text(i) for i in await self._send(self._live().zrange(self._keys.due, 0, limit - 1))]
        if not ids:
            return []
        reply = await self._send(
            self._due_read(
                keys=[self._keys.due, *(self._keys.interaction(i) for i in ids)],
                args=ids,
                client=self._live(),
            )
        )
        return [record for record in self._decode_many(reply) if record.status == "pending"]

    async def settled_runs(self, *, limit: int = 100, after: str | None = None) -> list[str]:
        """Walk the `settled` index in id order, a batch at a time: read the runs and their
        interaction ids, then those interactions' statuses; runs found gone, claimed or no
        longer paused are dropped from the index on the way."""
        if limit <= 0:
            return []
        found: list[str] = []
        start = "-" if after is None else "(" + after
        while len(found) < limit:
            batch = [
                text(run_id)
                for run_id in await self._send(
                    self._live().zrangebylex(self._keys.settled, start, "+", 0, _SETTLED_BATCH)
                )
            ]
            if not batch:
                break
            start = "(" + batch[-1]
            found += await self._settled_in(batch)
        return found[:limit]

    async def _settled_in(self, batch: list[str]) -> list[str]:
        """The runs of `batch` that are paused, unclaimed and wait for no interaction but had
        one answered or closed, in `batch` order."""
        keys: list[str] = []
        for run_id in batch:
            keys += [self._keys.run(run_id), self._keys.run_interactions(run_id)]
        runs = await self._send(self._runs_read(keys=keys, args=[], client=self._live()))
        paused = {
            run_id: [text(i) for i in ids]
            for run_id, (status, resumed_by, ids) in zip(batch, runs, strict=True)
            if status is not None and text(status) == "paused" and resumed_by is None
        }
        stale = [run_id for run_id in batch if run_id not in paused]
        if stale:
            await self._send(
                self._drop_stale(
                    keys=[self._keys.settled, *(self._keys.run(r) for r in stale)],
                    args=stale,
                    client=self._live(),
                )
            )
        ids = sorted({i for run_ids in paused.values() for i in run_ids})
        if not ids:
            return []
        values = await self._send(
            self._hmget_many(
                keys=[self._keys.interaction(i) for i in ids],
                args=["status", "run_id"],
                client=self._live(),
            )
        )
        statuses = dict(zip(ids, values, strict=True))
        return [run_id for run_id, own in paused.items() if _is_settled(run_id, own, statuses)]

    # Conversations

    async def set_thread_run(self, channel: str, thread_ts: str, run_id: str) -> None:
        key = self._keys.thread(channel, thread_ts)
        await self._send(self._live().set(key, run_id, ex=THREAD_TTL))

    async def get_thread_run(self, channel: str, thread_ts: str) -> str | None:
        value = await self._send(self._live().get(self._keys.thread(channel, thread_ts)))
        return None if value is None else text(value)

    async def acquire_thread(self, channel: str, thread_ts: str, *, owner: str, ttl: float) -> bool:
        """Redis expires the lease itself (PX), by the server's clock."""
        millis = lease_millis(owner, ttl)
        reply = await self._send(
            self._acquire_thread(
                keys=[self._keys.thread_lease(channel, thread_ts)],
                args=[owner, millis],
                client=self._live(),
            )
        )
        return bool(reply)

    async def take_thread(
        self, channel: str, thread_ts: str, *, owner: str, ttl: float, initiator: str | None = None
    ) -> ThreadTake:
        millis = lease_millis(owner, ttl)
        stop_key = self._keys.thread_stop(channel, thread_ts)
        held, stop = await self._send(
            self._take_thread(
                keys=[
                    self._keys.thread_lease(channel, thread_ts),
                    stop_key,
                    self._keys.thread_initiator(channel, thread_ts),
                ],
                args=[owner, millis, initiator or "", THREAD_TTL],
                client=self._live(),
            )
        )
        return ThreadTake(
            held=bool(held), stop=None if stop is None else decode_stop(stop, key=stop_key)
        )

    async def release_thread(
        self, channel: str, thread_ts: str, *, owner: str, run_id: str | None = None
    ) -> None:
        await self._send(
            self._release_thread(
                keys=[
                    self._keys.thread_lease(channel, thread_ts),
                    self._keys.thread(channel, thread_ts),
                ],
                args=[owner, run_id or "", THREAD_TTL],
                client=self._live(),
            )
        )

    async def stop_thread(self, channel: str, thread_ts: str, stop: ThreadStop) -> None:
        key = self._keys.thread_stop(channel, thread_ts)
        await self._send(self._live().set(key, encode_stop(stop), ex=STOP_TTL))

    async def thread_stop(self, channel: str, thread_ts: str) -> ThreadStop | None:
        key = self._keys.thread_stop(channel, thread_ts)
        value = await self._send(self._live().get(key))
        return None if value is None else decode_stop(value, key=key)

    async def thread_initiator(self, channel: str, thread_ts: str) -> str | None:
        key = self._keys.thread_initiator(channel, thread_ts)
        value = await self._send(self._live().get(key))
        return None if value is None else value.decode() if isinstance(value, bytes) else str(value)

    async def set_run_stream(self, run_id: str, ts: str) -> None:
        await self._send(self._live().set(self._keys.run_stream(run_id), ts, ex=STREAM_TTL))

    async def run_stream(self, run_id: str) -> str | None:
        value = await self._send(self._live().get(self._keys.run_stream(run_id)))
        return None if value is None else text(value)

    # App Home

    async def mark_home_opened(self, user: str, *, ttl: float) -> None:
        """One script: the mark, and the marks that ran out (or fell past the cap) trimmed."""
        await self._send(
            self._home_opened(
                keys=[self._keys.home_viewers],
                args=[user, repr(time.time() + ttl), repr(time.time()), HOME_VIEWER_CAP],
                client=self._live(),
            )
        )

    async def home_viewers(self, *, limit: int = 500) -> list[str]:
        if limit <= 0:
            return []
        found = self._live().zrevrangebyscore(
            self._keys.home_viewers, "+inf", f"({time.time()!r}", 0, limit
        )
        return [text(user) for user in await self._send(found)]

    # Audit

    async def audit(self, entry: AuditEntry) -> None:
        await self._send(
            self._audit(
                keys=[self._keys.audit], args=[encode_audit(entry), AUDIT_CAP], client=self._live()
            )
        )

    async def recent_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        key = self._keys.audit
        values = await self._send(self._live().lrange(key, 0, limit - 1))
        return [decode_audit(value, key=f"{key}[{index}]") for index, value in enumerate(values)]


def _time_arg(seconds: float | None) -> str:
    """A time or delay as the add script takes it: Python's exact text, or '' for none."""
    return "" if seconds is None else repr(float(seconds))


def _is_settled(run_id: str, ids: list[str], statuses: dict[str, Any]) -> bool:
    """No interaction of the run pending, and one answered or closed; ids since re-added by
    another run, or gone, do not count."""
    own = [
        text(status)
        for status, owner in (statuses[i] for i in ids)
        if status is not None and owner is not None and text(owner) == run_id
    ]
    return bool(own) and "pending" not in own


def _connections(client: RedisClient, gate: CallGate | None) -> int:
    """How many calls can be in flight at once before one waits for a connection."""
    if gate is not None:
        return gate.size
    if isinstance(client, aioredis.Redis):
        return client.connection_pool.max_connections
    return sys.maxsize  # a cluster client of the caller's own, without our gate: no wait known
