"""Reminders and escalations on Redis: the `nudges` sorted set of pending approvals scored by
when their next nudge is due, the scripts that read and fire them, and the Lua that keeps an
interaction's place in `nudges` right (shared with adding and withdrawing)."""

from __future__ import annotations

from typing import Any

from ._codec import check_now, text
from ._errors import UsageError
from ._nudges import NUDGE_KINDS, next_nudge
from ._records import InteractionClaim, Nudge, NudgeKind
from ._redis_cluster import RedisClient
from ._redis_ix import LUA_READ_IX
from ._redis_part import RedisPart

__all__ = ["LUA_SCHEDULE", "RedisNudges"]


# Puts a pending approval in `nudges` under when its next nudge is due (the reminder until it
# fired, then the escalation), or takes it out when nothing is left to fire.
LUA_SCHEDULE = """
local function schedule(ix, nudges, id)
  local v = redis.call('HMGET', ix, 'status', 'remind_at', 'escalate_at', 'reminded_at',
                       'escalated_at')
  local at = false
  if v[1] == 'pending' then
    if not v[4] then at = v[2] elseif not v[5] then at = v[3] end
  end
  if at then redis.call('ZADD', nudges, at, id) else redis.call('ZREM', nudges, id) end
end
"""

# KEYS: interaction, nudges; ARGV: id, kind, now. Fires a nudge once: only while the interaction
# is pending and unexpired, the nudge due and not fired yet, and an escalation only after the
# reminder.
_MARK_NUDGED = (
    LUA_READ_IX
    + LUA_SCHEDULE
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'remind_at', 'escalate_at',
                     'reminded_at', 'escalated_at')
if not v[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {0}
end
local now, exp, won = tonumber(ARGV[3]), tonumber(v[2]), 0
if v[1] == 'pending' and exp and exp > now then
  if ARGV[2] == 'reminder' then
    if v[3] and not v[5] and tonumber(v[3]) <= now then
      redis.call('HSET', KEYS[1], 'reminded_at', ARGV[3])
      won = 1
    end
  elseif v[4] and v[5] and not v[6] and tonumber(v[4]) <= now then
    redis.call('HSET', KEYS[1], 'escalated_at', ARGV[3])
    won = 1
  end
end
schedule(KEYS[1], KEYS[2], ARGV[1])
return {won, read_ix(KEYS[1])}
"""
)

# KEYS: nudges, then the interactions; ARGV: their ids. Each pending one with its nudge times;
# members answered, closed or gone are dropped from `nudges` on the way.
_NUDGES_READ = (
    LUA_READ_IX
    + """
local out = {}
for i = 2, #KEYS do
  local v = read_ix(KEYS[i])
  if v[1] and v[2] == 'pending' then
    out[#out + 1] = ARGV[i - 1]; out[#out + 1] = v
    out[#out + 1] = redis.call('HMGET', KEYS[i], 'remind_at', 'escalate_at')
  else
    redis.call('ZREM', KEYS[1], ARGV[i - 1])
  end
end
return out
"""
)


class RedisNudges(RedisPart):
    """The reminder and escalation half of `RedisStore`."""

    def _register_nudges(self, client: RedisClient) -> None:
        self._mark_nudged = client.register_script(_MARK_NUDGED)
        self._nudges_read = client.register_script(_NUDGES_READ)

    async def due_nudges(self, now: float, *, limit: int = 100) -> list[Nudge]:
        check_now(now)
        if limit <= 0:
            return []
        found: list[Nudge] = []
        offset = 0
        # Members past their expiry stay in `nudges` until the expiry sweep closes them; they
        # are skipped here, so a page may hold fewer than `limit` due ones.
        while len(found) < limit:
            page = self._live().zrangebyscore(
                self._keys.nudges, "-inf", repr(float(now)), offset, limit
            )
            ids = [text(i) for i in await self._send(page)]
            if not ids:
                break
            offset += len(ids)
            reply = await self._send(
                self._nudges_read(
                    keys=[self._keys.nudges, *(self._keys.interaction(i) for i in ids)],
                    args=ids,
                    client=self._live(),
                )
            )
            # Dropped members shift the ones after them: read again from where they were.
            offset -= len(ids) - len(reply) // 3
            for i in range(0, len(reply), 3):
                record = self._decode_ix(text(reply[i]), reply[i + 1])
                remind_at, escalate_at = (_time(value) for value in reply[i + 2])
                nudge = next_nudge(record, remind_at, escalate_at, now)
                if nudge is not None:
                    found.append(nudge)
            if len(ids) < limit:
                break
        return found[:limit]

    async def mark_nudged(
        self, interaction_id: str, kind: NudgeKind, *, now: float
    ) -> InteractionClaim:
        if kind not in NUDGE_KINDS:
            raise UsageError(f"{kind!r} is not a nudge (reminder or escalation)")
        check_now(now)
        reply = await self._send(
            self._mark_nudged(
                keys=[self._keys.interaction(interaction_id), self._keys.nudges],
                args=[interaction_id, kind, repr(float(now))],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)


def _time(value: Any) -> float | None:
    return None if value is None else float(text(value))
