"""The Redis store: one hash per run and per interaction, claims as Lua scripts (one round trip).

Fields that change after a write (`resumed_by`, an interaction's status and answer, where its
card was posted) live beside the record's JSON in the same hash, so a script can check and set
them atomically without decoding and re-encoding the JSON in Lua (cjson would turn `[]` into
`{}` and round floats to 14 digits).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import redis.asyncio as aioredis

from ._codec import (
    INTERACTION_OVERLAY,
    check_interaction_times,
    check_now,
    decode_audit,
    decode_interaction,
    decode_run,
    encode_answer,
    encode_audit,
    encode_interaction,
    encode_run,
    lease_millis,
    text,
)
from ._errors import CorruptRecordError, StoreClosedError, StoreError, StoreURLError
from ._keys import (
    AUDIT_CAP,
    DEFAULT_PREFIX,
    DELIVERY_TTL,
    RUN_TTL,
    SETTLED_TTL,
    THREAD_TTL,
    RedisKeys,
    interaction_ttl,
)
from ._records import (
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    InteractionStatus,
    RunClaim,
    RunRecord,
)
from ._redis_inbox import RedisInbox
from ._url import mask_url, redis_options, store_kind

__all__ = ["RedisStore"]

_T = TypeVar("_T")

_IX_FIELDS = ("rec", *INTERACTION_OVERLAY)
_READ_IX = (
    "local function read_ix(key) return redis.call('HMGET', key, "
    + ", ".join(f"'{name}'" for name in _IX_FIELDS)
    + ") end\n"
)

# Marks the run of the interaction at `ix` as settled while it is paused and unclaimed. The run's
# key is derived from a prefix (like the reads below), which a Redis cluster would need tagged.
_MARK_SETTLED = """
local function mark_settled(ix, settled, run_prefix, ttl)
  local run = redis.call('HGET', ix, 'run_id')
  if not run then return end
  local r = redis.call('HMGET', run_prefix .. run, 'status', 'resumed_by')
  if r[1] == 'paused' and not r[2] then
    redis.call('ZADD', settled, 0, run)
    redis.call('EXPIRE', settled, ttl)
  end
end
"""

_SAVE_RUN = """
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'status', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', KEYS[1], 'resumed_by', ARGV[3]) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""

# Won again by the child that holds the claim: a retried work item resumes with the same derived
# child id and must carry on with what it started. Any other child loses.
_CLAIM_RUN = """
local v = redis.call('HMGET', KEYS[1], 'rec', 'status', 'resumed_by')
if not v[1] then return {0} end
if v[2] == 'paused' and (not v[3] or v[3] == ARGV[1]) then
  redis.call('HSET', KEYS[1], 'resumed_by', ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return {1, v[1], ARGV[1]}
end
return {0, v[1], v[3]}
"""

# KEYS: due, then (interaction, run index) per record; ARGV: seven values per record.
_ADD_INTERACTIONS = """
local added = 0
for i = 0, (#KEYS - 1) / 2 - 1 do
  local ix, runix, a = KEYS[2 + 2 * i], KEYS[3 + 2 * i], 7 * i
  local id, status, exp = ARGV[a + 1], ARGV[a + 3], ARGV[a + 4]
  local current = redis.call('HGET', ix, 'status')
  if not current or current == 'pending' then
    redis.call('DEL', ix)
    redis.call('HSET', ix, 'rec', ARGV[a + 2], 'status', status, 'expires_at', exp,
               'run_id', ARGV[a + 7])
    redis.call('EXPIRE', ix, ARGV[a + 5])
    if status == 'pending' then
      redis.call('ZADD', KEYS[1], exp, id)
    else
      redis.call('ZREM', KEYS[1], id)
    end
    redis.call('ZADD', runix, 'NX', redis.call('ZCARD', runix), id)
    redis.call('EXPIRE', runix, ARGV[a + 6])
    added = added + 1
  end
end
return added
"""

_SET_MESSAGE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'channel', ARGV[1], 'message_ts', ARGV[2])
return 1
"""

# An answer at or after `expires_at` loses and changes nothing: the expiry sweep still finds
# the interaction in `due`, closes it, cancels the run and updates the card.
_ANSWER = (
    _READ_IX
    + _MARK_SETTLED
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'expires_at')
if not v[1] then return {0} end
local won, expires_at = 0, tonumber(v[2])
if v[1] == 'pending' and expires_at and expires_at > tonumber(ARGV[4]) then
  redis.call('HSET', KEYS[1], 'status', 'answered', 'answer', ARGV[2],
             'answered_by', ARGV[3], 'answered_at', ARGV[4])
  redis.call('ZREM', KEYS[2], ARGV[1])
  mark_settled(KEYS[1], KEYS[3], ARGV[5], ARGV[6])
  won = 1
end
return {won, read_ix(KEYS[1])}
"""
)

_CLOSE = (
    _READ_IX
    + _MARK_SETTLED
    + """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {0} end
local won = 0
if current == 'pending' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'answered_at', ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  mark_settled(KEYS[1], KEYS[3], ARGV[4], ARGV[5])
  won = 1
end
return {won, read_ix(KEYS[1])}
"""
)

# Reads many interactions in one round trip. Their keys are derived from ARGV[1] (the
# interaction key prefix), which is fine on a single Redis but would need hash tags on a cluster.
_RUN_INTERACTIONS = (
    _READ_IX
    + """
local out = {}
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local v = read_ix(ARGV[1] .. id)
  if v[1] then out[#out + 1] = id; out[#out + 1] = v end
end
return out
"""
)

# Members whose hash has expired (TTL) are dropped from `due` on the way.
_DUE = (
    _READ_IX
    + """
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])) do
  local v = read_ix(ARGV[3] .. id)
  if v[1] then
    out[#out + 1] = id; out[#out + 1] = v
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""
)

# Walks the settled index in id order from ARGV[1], dropping runs that are gone, claimed or no
# longer paused, and skipping runs that still wait for an interaction (an answer to one of
# several cards marks the run; a later claim removes it). ARGV: after ('' for the start), limit,
# then the run, run index and interaction key prefixes.
_SETTLED = """
local out, limit = {}, tonumber(ARGV[2])
local start = '-'
if ARGV[1] ~= '' then start = '(' .. ARGV[1] end
while #out < limit do
  local batch = redis.call('ZRANGEBYLEX', KEYS[1], start, '+', 'LIMIT', 0, 100)
  if #batch == 0 then break end
  for _, run in ipairs(batch) do
    start = '(' .. run
    local r = redis.call('HMGET', ARGV[3] .. run, 'status', 'resumed_by')
    if r[1] ~= 'paused' or r[2] then
      redis.call('ZREM', KEYS[1], run)
    else
      local settled, pending = false, false
      for _, id in ipairs(redis.call('ZRANGE', ARGV[4] .. run, 0, -1)) do
        local v = redis.call('HMGET', ARGV[5] .. id, 'status', 'run_id')
        if v[1] and v[2] == run then
          if v[1] == 'pending' then pending = true; break end
          settled = true
        end
      end
      if settled and not pending then
        out[#out + 1] = run
        if #out >= limit then break end
      end
    end
  end
end
return out
"""

# Taken when free (expired keys are gone) or already the owner's, which extends it.
_ACQUIRE_THREAD = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

_RELEASE_THREAD = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

_CLOSING: frozenset[str] = frozenset({"expired", "superseded", "cancelled"})


class RedisStore(RedisInbox):
    """`Store` on Redis (redis-py's asyncio client); every call is one round trip.

    Build it with `RedisStore.from_url(url)` (a `?prefix=` query names the key namespace) or
    around a client of your own with `RedisStore(client, prefix=...)`; use it as an async context
    manager or call `aclose()`.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = DEFAULT_PREFIX,
        owns_client: bool = False,
        name: str = "redis",
    ) -> None:
        self._client = client
        self._keys = RedisKeys(prefix)
        self._owns_client = owns_client
        self._closed = False
        self._name = name
        # register_script hashes once; the server learns each script on its first EVALSHA miss.
        self._save_run = client.register_script(_SAVE_RUN)
        self._claim_run = client.register_script(_CLAIM_RUN)
        self._add = client.register_script(_ADD_INTERACTIONS)
        self._set_message = client.register_script(_SET_MESSAGE)
        self._answer = client.register_script(_ANSWER)
        self._close = client.register_script(_CLOSE)
        self._run_ix = client.register_script(_RUN_INTERACTIONS)
        self._due = client.register_script(_DUE)
        self._settled = client.register_script(_SETTLED)
        self._acquire_thread = client.register_script(_ACQUIRE_THREAD)
        self._release_thread = client.register_script(_RELEASE_THREAD)
        self._register_inbox(client)

    @classmethod
    def from_url(cls, url: str) -> Self:
        """`redis://`, `rediss://` or `unix://`, with an optional `?prefix=` (default `hb:`) and
        the connection pool's `?pool_size=` (default 64) and `?pool_timeout=` (seconds, 10).

        The pool blocks: a call past `pool_size` connections in use waits up to `pool_timeout`
        for one to come back, so a burst is served late rather than lost. Other query
        parameters go to redis-py.
        """
        if store_kind(url) != "redis":
            raise StoreURLError(f"`{mask_url(url)}` is not a redis://, rediss:// or unix:// URL")
        options = redis_options(url)
        try:
            pool = aioredis.BlockingConnectionPool.from_url(
                options.client_url,
                max_connections=options.pool_size,
                timeout=options.pool_timeout,
            )
        except ValueError as exc:
            raise StoreURLError(f"`{mask_url(url)}` is not a usable Redis URL: {exc}") from exc
        # from_pool: the client owns the pool and disconnects it when closed.
        client = aioredis.Redis.from_pool(pool)
        prefix = options.prefix or DEFAULT_PREFIX
        return cls(client, prefix=prefix, owns_client=True, name=mask_url(url))

    def __repr__(self) -> str:
        return f"RedisStore({self._name!r}, prefix={self._keys.prefix!r})"

    @property
    def prefix(self) -> str:
        return self._keys.prefix

    async def __aenter__(self) -> Self:
        """Checks the server answers, so a wrong URL fails at start-up, not on the first click."""
        try:
            await self._live().ping()
        except aioredis.RedisError as exc:
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
        if self._owns_client:
            await self._client.aclose()

    def _live(self) -> aioredis.Redis:
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed")
        return self._client

    async def _send(self, call: Awaitable[_T]) -> _T:
        """Await one round trip; a server that went away (or refused) is a `StoreError`.

        redis-py has already retried the connection by then, and a script the server forgot
        (NOSCRIPT, after a restart or `SCRIPT FLUSH`) was loaded again. A write whose reply was
        lost may still have happened: a claim that fails this way counts as neither won nor lost.
        """
        try:
            return await call
        except aioredis.RedisError as exc:
            raise StoreError(f"Redis at `{self._name}` failed: {exc}") from exc

    # Runs

    async def save_run(self, run: RunRecord) -> None:
        """Insert or replace the run; a `resumed_by` already stored is kept (claims are final)."""
        await self._send(
            self._save_run(
                keys=[self._keys.run(run.run_id)],
                args=[encode_run(run), run.status, run.resumed_by or "", RUN_TTL],
                client=self._live(),
            )
        )

    async def load_run(self, run_id: str) -> RunRecord | None:
        key = self._keys.run(run_id)
        rec, resumed_by = await self._send(self._live().hmget(key, ["rec", "resumed_by"]))
        if rec is None:
            return None
        return decode_run(rec, key=key, run_id=run_id, resumed_by=resumed_by)

    async def claim_run(self, run_id: str, *, child_id: str) -> RunClaim:
        if not child_id:
            raise ValueError("`child_id` must be a non-empty run id")
        key = self._keys.run(run_id)
        reply = await self._send(
            self._claim_run(
                keys=[key, self._keys.settled], args=[child_id, run_id], client=self._live()
            )
        )
        if len(reply) == 1:
            return RunClaim(won=False, run=None)
        run = decode_run(reply[1], key=key, run_id=run_id, resumed_by=reply[2])
        return RunClaim(won=bool(reply[0]), run=run)

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

    async def add_interactions(self, records: list[InteractionRecord]) -> None:
        """Insert records; an id already stored is replaced only while it is still pending."""
        if not records:
            return
        now = time.time()
        keys = [self._keys.due]
        args: list[str | bytes | int] = []
        for record in records:
            check_interaction_times(record)
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
            ]
        await self._send(self._add(keys=keys, args=args, client=self._live()))

    async def get_interaction(self, interaction_id: str) -> InteractionRecord | None:
        key = self._keys.interaction(interaction_id)
        values = await self._send(self._live().hmget(key, _IX_FIELDS))
        if values[0] is None:
            return None
        return self._decode_ix(interaction_id, values)

    async def run_interactions(self, run_id: str) -> list[InteractionRecord]:
        """The run's interactions in the order added; ids since re-added by a later run are not."""
        reply = await self._send(
            self._run_ix(
                keys=[self._keys.run_interactions(run_id)],
                args=[self._keys.interaction_prefix],
                client=self._live(),
            )
        )
        return [record for record in self._decode_many(reply) if record.run_id == run_id]

    async def set_message(self, interaction_id: str, *, channel: str, message_ts: str) -> None:
        """Record where the card was posted; nothing happens when the interaction is gone."""
        await self._send(
            self._set_message(
                keys=[self._keys.interaction(interaction_id)],
                args=[channel, message_ts],
                client=self._live(),
            )
        )

    async def answer_interaction(
        self, interaction_id: str, *, answer: Any, answered_by: str, now: float
    ) -> InteractionClaim:
        """Claim a pending interaction for `answered_by`.

        Lost when missing, not pending, or `expires_at <= now`. A late answer changes nothing:
        the record comes back still `pending` with `expires_at <= now` (read it as "expired"),
        and the expiry sweep remains the one place that closes it and cancels its run.
        """
        check_now(now)
        reply = await self._send(
            self._answer(
                keys=[self._keys.interaction(interaction_id), self._keys.due, self._keys.settled],
                args=[
                    interaction_id,
                    encode_answer(answer),
                    answered_by,
                    repr(float(now)),
                    self._keys.run_prefix,
                    SETTLED_TTL,
                ],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)

    async def close_interaction(
        self, interaction_id: str, *, status: InteractionStatus, now: float
    ) -> InteractionClaim:
        """Move a pending interaction to `status`; `now` is kept as its `answered_at`."""
        if status not in _CLOSING:
            raise ValueError(f"cannot close an interaction as {status!r}")
        check_now(now)
        reply = await self._send(
            self._close(
                keys=[self._keys.interaction(interaction_id), self._keys.due, self._keys.settled],
                args=[interaction_id, status, repr(float(now)), self._keys.run_prefix, SETTLED_TTL],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)

    def _interaction_claim(self, interaction_id: str, reply: Sequence[Any]) -> InteractionClaim:
        if len(reply) == 1:
            return InteractionClaim(won=False, record=None)
        record = self._decode_ix(interaction_id, reply[1])
        return InteractionClaim(won=bool(reply[0]), record=record)

    async def due_interactions(self, now: float, *, limit: int = 100) -> list[InteractionRecord]:
        check_now(now)
        if limit <= 0:
            return []
        reply = await self._send(
            self._due(
                keys=[self._keys.due],
                args=[repr(float(now)), limit, self._keys.interaction_prefix],
                client=self._live(),
            )
        )
        return [record for record in self._decode_many(reply) if record.status == "pending"]

    async def settled_runs(self, *, limit: int = 100, after: str | None = None) -> list[str]:
        """Read from the `settled` index (one script); stale members are dropped on the way."""
        if limit <= 0:
            return []
        reply = await self._send(
            self._settled(
                keys=[self._keys.settled],
                args=[
                    after or "",
                    limit,
                    self._keys.run_prefix,
                    self._keys.run_interactions_prefix,
                    self._keys.interaction_prefix,
                ],
                client=self._live(),
            )
        )
        return [text(run_id) for run_id in reply]

    # Conversations

    async def set_thread_run(self, channel: str, thread_ts: str, run_id: str) -> None:
        key = self._keys.thread(channel, thread_ts)
        await self._send(self._live().set(key, run_id, ex=THREAD_TTL))

    async def get_thread_run(self, channel: str, thread_ts: str) -> str | None:
        value = await self._send(self._live().get(self._keys.thread(channel, thread_ts)))
        return None if value is None else text(value)

    async def first_delivery(self, event_id: str) -> bool:
        """True the first time within `DELIVERY_TTL`; SET NX makes concurrent repeats False."""
        key = self._keys.delivery(event_id)
        return bool(await self._send(self._live().set(key, b"1", nx=True, ex=DELIVERY_TTL)))

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

    async def release_thread(self, channel: str, thread_ts: str, *, owner: str) -> None:
        await self._send(
            self._release_thread(
                keys=[self._keys.thread_lease(channel, thread_ts)],
                args=[owner],
                client=self._live(),
            )
        )

    # Audit

    async def audit(self, entry: AuditEntry) -> None:
        async with self._live().pipeline(transaction=True) as pipe:
            pipe.lpush(self._keys.audit, encode_audit(entry))
            pipe.ltrim(self._keys.audit, 0, AUDIT_CAP - 1)
            await self._send(pipe.execute())

    async def recent_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        key = self._keys.audit
        values = await self._send(self._live().lrange(key, 0, limit - 1))
        return [decode_audit(value, key=f"{key}[{index}]") for index, value in enumerate(values)]
