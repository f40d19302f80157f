"""Standing grants on Redis: one hash per grant (expired by its TTL), a sorted set of every grant
and one per place a grant covers (tool, channel, thread), all scored by `expires_at`.

Index entries are not removed on a revoke: a revoke touches the grant's hash only (one key, one
script), and every read checks `revoked_at` and `expires_at` in the hash itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ._codec import check_now, encode_audit, text
from ._grant import GRANT_OVERLAY, Grant, GrantClaim, check_grant, decode_grant, encode_grant
from ._keys import AUDIT_CAP, GRANT_GRACE, LONGEST_WAIT
from ._records import AuditEntry
from ._redis_cluster import RedisClient
from ._redis_part import RedisPart

__all__ = ["RedisGrants"]


_GRANT_FIELDS = ("rec", *GRANT_OVERLAY)

# KEYS: grant, grants, scope index, audit. ARGV: rec, expires_at, id, TTL, now, cutoff, audit
# entry, audit cap. Only a grant not stored yet is added (the id comes from the approval, so a
# retried click adds it once, and a revoked one is not brought back). Index entries that expired
# before `cutoff` are dropped on the way; an index lives as long as its longest grant.
_ADD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if tonumber(ARGV[2]) <= tonumber(ARGV[5]) then return 0 end
redis.call('HSET', KEYS[1], 'rec', ARGV[1], 'expires_at', ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[4])
for i = 2, 3 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[6])
  redis.call('ZADD', KEYS[i], ARGV[2], ARGV[3])
  if redis.call('TTL', KEYS[i]) < tonumber(ARGV[4]) then redis.call('EXPIRE', KEYS[i], ARGV[4]) end
end
redis.call('LPUSH', KEYS[4], ARGV[7])
redis.call('LTRIM', KEYS[4], 0, ARGV[8] - 1)
return 1
"""

# KEYS: grant, audit. ARGV: by, now, audit entry, audit cap.
_REVOKE = """
local v = redis.call('HMGET', KEYS[1], 'rec', 'expires_at', 'revoked_at')
if not v[1] then return {0} end
local won = 0
if not v[3] and tonumber(v[2]) > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'revoked_at', ARGV[2], 'revoked_by', ARGV[1])
  redis.call('LPUSH', KEYS[2], ARGV[3])
  redis.call('LTRIM', KEYS[2], 0, ARGV[4] - 1)
  won = 1
end
return {won, redis.call('HMGET', KEYS[1], 'rec', 'revoked_at', 'revoked_by')}
"""

# KEYS: sorted sets; ARGV: now. The ids of each scored after `now`, longest-lasting first.
_LIVE_IDS = """
local out = {}
for i, key in ipairs(KEYS) do
  local ids = redis.call('ZREVRANGEBYSCORE', key, '+inf', '(' .. ARGV[1])
  for _, id in ipairs(ids) do out[#out + 1] = id end
end
return out
"""

# KEYS: grants; ARGV: their fields. One consistent read of them all.
_READ_MANY = """
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HMGET', key, unpack(ARGV)) end
return out
"""


class RedisGrants(RedisPart):
    """The grant half of `RedisStore` (all but `answer_under_grant`, which is an answer)."""

    def _register_grants(self, client: RedisClient) -> None:
        self._add_grant_script = client.register_script(_ADD)
        self._revoke_grant_script = client.register_script(_REVOKE)
        self._live_ids_script = client.register_script(_LIVE_IDS)
        self._read_grants_script = client.register_script(_READ_MANY)

    async def add_grant(self, grant: Grant, *, audit: AuditEntry) -> bool:
        check_grant(grant)
        ttl = int(min(max(grant.expires_at - time.time(), 0.0), LONGEST_WAIT)) + GRANT_GRACE
        keys = self._keys
        reply = await self._send(
            self._add_grant_script(
                keys=[
                    keys.grant(grant.grant_id),
                    keys.grants,
                    keys.grant_scope(grant.tool, grant.channel, _thread_of(grant)),
                    keys.audit,
                ],
                args=[
                    encode_grant(grant),
                    repr(float(grant.expires_at)),
                    grant.grant_id,
                    ttl,
                    repr(float(grant.created_at)),
                    repr(float(grant.created_at - GRANT_GRACE)),
                    encode_audit(audit),
                    AUDIT_CAP,
                ],
                client=self._live(),
            )
        )
        return bool(reply)

    async def get_grant(self, grant_id: str) -> Grant | None:
        values = await self._send(self._live().hmget(self._keys.grant(grant_id), _GRANT_FIELDS))
        return None if values[0] is None else self._decode_grant(grant_id, values)

    async def covering_grants(
        self, tool: str, *, channel: str, thread_ts: str | None, now: float
    ) -> list[Grant]:
        check_now(now)
        scopes = [self._keys.grant_scope(tool, channel, None)]
        if thread_ts:
            scopes.insert(0, self._keys.grant_scope(tool, channel, thread_ts))
        grants = await self._live_grants(scopes, now)
        found = [g for g in grants if g.covers(tool, channel=channel, thread_ts=thread_ts)]
        return sorted(found, key=lambda g: -g.expires_at)

    async def active_grants(
        self, *, now: float, granted_by: str | None = None, limit: int = 100
    ) -> list[Grant]:
        check_now(now)
        if limit <= 0:
            return []
        grants = await self._live_grants([self._keys.grants], now)
        if granted_by is not None:
            grants = [g for g in grants if g.granted_by == granted_by]
        return sorted(grants, key=lambda g: (g.expires_at, g.grant_id))[:limit]

    async def revoke_grant(
        self, grant_id: str, *, by: str, now: float, audit: AuditEntry
    ) -> GrantClaim:
        check_now(now)
        reply = await self._send(
            self._revoke_grant_script(
                keys=[self._keys.grant(grant_id), self._keys.audit],
                args=[by, repr(float(now)), encode_audit(audit), AUDIT_CAP],
                client=self._live(),
            )
        )
        if len(reply) == 1:
            return GrantClaim(won=False, grant=None)
        return GrantClaim(won=bool(reply[0]), grant=self._decode_grant(grant_id, reply[1]))

    async def _live_grants(self, indexes: list[str], now: float) -> list[Grant]:
        """The grants the indexes list as lasting past `now`, read in one script, those
        revoked or gone (a hash expired by its TTL) left out."""
        reply = await self._send(
            self._live_ids_script(keys=indexes, args=[repr(float(now))], client=self._live())
        )
        ids = list(dict.fromkeys(text(i) for i in reply))
        if not ids:
            return []
        values = await self._send(
            self._read_grants_script(
                keys=[self._keys.grant(i) for i in ids], args=_GRANT_FIELDS, client=self._live()
            )
        )
        grants = [
            self._decode_grant(i, v) for i, v in zip(ids, values, strict=True) if v[0] is not None
        ]
        return [g for g in grants if g.active(now)]

    def _decode_grant(self, grant_id: str, values: Sequence[Any]) -> Grant:
        overlay = dict(zip(GRANT_OVERLAY, values[1:], strict=True))
        return decode_grant(
            values[0], key=self._keys.grant(grant_id), grant_id=grant_id, overlay=overlay
        )


def _thread_of(grant: Grant) -> str | None:
    return grant.thread_ts if grant.scope == "thread" else None
