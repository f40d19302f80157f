"""Answers on Redis: an interaction answered (alone, with a vote, under a grant, or with the
resume's claims), closed, or its answer or a vote taken back, each one Lua script."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._codec import (
    approves,
    check_now,
    decode_stop,
    encode_answer,
    encode_audit,
    encode_vote,
    lease_millis,
    vote_audits,
)
from ._errors import UsageError
from ._keys import AUDIT_CAP, SETTLED_TTL
from ._records import (
    AnswerClaim,
    AuditEntry,
    InteractionClaim,
    InteractionStatus,
    StopGuard,
    TurnClaim,
    Vote,
)
from ._redis_cluster import RedisClient
from ._redis_ix import LUA_READ_IX
from ._redis_log import LUA_READ_LOG, decode_loaded
from ._redis_nudges import LUA_SCHEDULE
from ._redis_part import RedisPart
from ._redis_stops import LUA_STOPPED_SINCE, stopped_reply
from ._withdrawal import LUA_DROP_VOTES, withdrawal_audits

__all__ = ["RedisAnswers"]


# Lists the run of the interaction at `ix` in the settled index. Whether that run is still paused
# and unclaimed is left to `settled_runs`: the run's key is not known before the script reads
# `run_id`, and a script may only touch the keys it was given (on a cluster, in one slot).
_MARK_SETTLED = """
local function mark_settled(ix, settled, ttl)
  local run = redis.call('HGET', ix, 'run_id')
  if not run then return end
  redis.call('ZADD', settled, 0, run)
  redis.call('EXPIRE', settled, ttl)
end
"""

# KEYS: interaction, due, settled, audit, then (run, run index, thread lease, transcripts, thread
# stop mark) when the resume's claims or a stop guard are asked for, and with the guard the stop
# mark again (10th): an answer to a run whose turn was stopped since changes nothing and replies
# {0, ix, false, mark}. ARGV: id, answer, answered_by, now, settled
# TTL, audit entry, audit cap, run id, child id, lease owner, lease ms (empty without a turn),
# votes needed, whether the answer approves, this vote, then the audit entries of votes
# 1 .. needed - 1. An Approve of an approval
# whose rule asks for another number of approvers than `needed` loses (fail closed: a caller that
# forgot the rule must not let one person approve a two-person request). Then the answer: a
# pending interaction moves to `answered`, leaves `due` and marks its run settled, its audit
# entry with it; an answer at or after `expires_at` loses and changes nothing (the expiry sweep
# still finds the interaction in `due`, closes it, cancels the run and updates the card);
# then, only when this was the run's one interaction, the run paused and unclaimed and the lease
# free or the owner's, the run is claimed and the lease taken, both or neither (a run with other
# interactions, or a busy thread, is resumed the long way, where the runtime claims it); the
# thread's stop mark is read with them, for the turn they start. Reply {won, ix, stop, run...}.
# With several votes needed, a new voter's vote is appended to `votes` as text (decoding the list
# is fine, re-encoding it would round the times); before the last vote that is all, and the last
# answers with the voters' ids spliced into the answer object. Reply {won, ix, partial} then.
_ANSWER_AND_CLAIM = (
    LUA_READ_IX
    + _MARK_SETTLED
    + LUA_READ_LOG
    + LUA_STOPPED_SINCE
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'expires_at', 'run_id', 'votes')
if not v[1] then return {0} end
local expires_at = tonumber(v[2])
if v[1] ~= 'pending' or not expires_at or expires_at <= tonumber(ARGV[4]) then
  return {0, read_ix(KEYS[1])}
end
if KEYS[10] then
  local mark = stopped_since(KEYS[5], KEYS[10])
  if mark then return {0, read_ix(KEYS[1]), false, mark} end
end
local needed, answer = tonumber(ARGV[12]), ARGV[2]
if ARGV[13] == '1' then
  local rec = cjson.decode(redis.call('HGET', KEYS[1], 'rec'))
  if rec.kind == 'approval' then
    local rule, count = rec.payload.rule, 1
    if rule ~= nil and rule ~= cjson.null then
      if type(rule) ~= 'table' then return {0, read_ix(KEYS[1])} end
      if rule.count ~= nil and rule.count ~= cjson.null then count = rule.count end
    end
    if type(count) ~= 'number' or count ~= needed then return {0, read_ix(KEYS[1])} end
  end
end
if needed > 1 then
  local votes = v[4] and cjson.decode(v[4]) or {}
  local users = {}
  for i, vote in ipairs(votes) do
    if vote.user == ARGV[3] then return {0, read_ix(KEYS[1])} end
    users[i] = vote.user
  end
  users[#users + 1] = ARGV[3]
  if #votes == 0 then
    redis.call('HSET', KEYS[1], 'votes', '[' .. ARGV[14] .. ']')
  else
    redis.call('HSET', KEYS[1], 'votes', string.sub(v[4], 1, -2) .. ',' .. ARGV[14] .. ']')
  end
  if #users < needed then
    redis.call('LPUSH', KEYS[4], ARGV[14 + #users])
    redis.call('LTRIM', KEYS[4], 0, ARGV[7] - 1)
    return {1, read_ix(KEYS[1]), 1}
  end
  local sep = ','
  if answer == '{}' then sep = '' end
  answer = string.sub(answer, 1, -2) .. sep .. '"approvers":' .. cjson.encode(users) .. '}'
end
redis.call('HSET', KEYS[1], 'status', 'answered', 'answer', answer,
           'answered_by', ARGV[3], 'answered_at', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
mark_settled(KEYS[1], KEYS[3], ARGV[5])
redis.call('LPUSH', KEYS[4], ARGV[6])
redis.call('LTRIM', KEYS[4], 0, ARGV[7] - 1)
local ix = read_ix(KEYS[1])
if ARGV[10] == '' or v[3] ~= ARGV[8] then return {1, ix} end
local own = redis.call('ZRANGE', KEYS[6], 0, -1)
if #own ~= 1 or own[1] ~= ARGV[1] then return {1, ix} end
local r = redis.call('HMGET', KEYS[5], 'rec', 'status', 'resumed_by')
if not r[1] or r[2] ~= 'paused' or r[3] then return {1, ix} end
local holder = redis.call('GET', KEYS[7])
if holder and holder ~= ARGV[10] then return {1, ix} end
redis.call('SET', KEYS[7], ARGV[10], 'PX', ARGV[11])
redis.call('HSET', KEYS[5], 'resumed_by', ARGV[9])
redis.call('ZREM', KEYS[3], ARGV[8])
local stop = redis.call('GET', KEYS[9])
local log = read_log(r[1], KEYS[8])
if not log then return {1, ix, stop, r[1], ARGV[9]} end
return {1, ix, stop, r[1], ARGV[9], log[1], log[2]}
"""
)

# KEYS: interaction, due, settled, audit, grant, and with a stop guard the run and its thread's
# stop mark. ARGV: id, answer, answered_by, now, settled TTL, audit entry, audit cap. The answer
# as `_ANSWER_AND_CLAIM` without a turn or votes, with its audit entry, taken only while the
# grant is neither revoked nor expired: a revoke and an answer under it are ordered by Redis
# itself; nor after a stop of the turn that asked ({0, ix, false, mark}).
_ANSWER_UNDER_GRANT = (
    LUA_READ_IX
    + _MARK_SETTLED
    + LUA_STOPPED_SINCE
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'expires_at')
if not v[1] then return {0} end
if v[1] == 'pending' and KEYS[7] then
  local mark = stopped_since(KEYS[6], KEYS[7])
  if mark then return {0, read_ix(KEYS[1]), false, mark} end
end
local g = redis.call('HMGET', KEYS[5], 'expires_at', 'revoked_at')
local now, expires_at = tonumber(ARGV[4]), tonumber(v[2])
if v[1] ~= 'pending' or not expires_at or expires_at <= now
   or not g[1] or g[2] or tonumber(g[1]) <= now then
  return {0, read_ix(KEYS[1])}
end
redis.call('HSET', KEYS[1], 'status', 'answered', 'answer', ARGV[2],
           'answered_by', ARGV[3], 'answered_at', ARGV[4])
redis.call('ZREM', KEYS[2], ARGV[1])
mark_settled(KEYS[1], KEYS[3], ARGV[5])
redis.call('LPUSH', KEYS[4], ARGV[6])
redis.call('LTRIM', KEYS[4], 0, ARGV[7] - 1)
return {1, read_ix(KEYS[1])}
"""
)

_CLOSE = (
    LUA_READ_IX
    + _MARK_SETTLED
    + """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return {0} end
local won = 0
if current == 'pending' then
  redis.call('HSET', KEYS[1], 'status', ARGV[2], 'answered_at', ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[1])
  mark_settled(KEYS[1], KEYS[3], ARGV[4])
  won = 1
end
return {won, read_ix(KEYS[1])}
"""
)

# KEYS: interaction, due, nudges, run, audit; ARGV: id, answered_by, run id, audit cap, how many
# voters (n), the n voters, then their n audit entries. An answer goes back to pending only while
# the run it would resume is paused and unclaimed. An answer of several votes keeps the votes of
# everyone but the voters, and is taken back only when each of them has one; an answer without
# votes only for its approver.
_WITHDRAW = (
    LUA_READ_IX
    + LUA_SCHEDULE
    + LUA_DROP_VOTES
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'answered_by', 'run_id', 'expires_at', 'votes')
if not v[1] then return {0} end
local r = redis.call('HMGET', KEYS[4], 'status', 'resumed_by')
if v[1] ~= 'answered' or v[2] ~= ARGV[2] or v[3] ~= ARGV[3] or r[1] ~= 'paused' or r[2] then
  return {0, read_ix(KEYS[1])}
end
local n, gone = tonumber(ARGV[5]), {}
for i = 1, n do gone[ARGV[5 + i]] = true end
local kept, dropped, total = false, 0, 0
if v[5] then kept, dropped, total = drop_votes(v[5], gone) end
if total == 0 then
  if n ~= 1 or ARGV[6] ~= ARGV[2] then return {0, read_ix(KEYS[1])} end
elseif dropped ~= n then
  return {0, read_ix(KEYS[1])}
end
redis.call('HSET', KEYS[1], 'status', 'pending')
redis.call('HDEL', KEYS[1], 'answer', 'answered_by', 'answered_at')
set_votes(KEYS[1], kept)
redis.call('ZADD', KEYS[2], v[4], ARGV[1])
schedule(KEYS[1], KEYS[3], ARGV[1])
for i = 1, n do redis.call('LPUSH', KEYS[5], ARGV[5 + n + i]) end
redis.call('LTRIM', KEYS[5], 0, ARGV[4] - 1)
return {1, read_ix(KEYS[1])}
"""
)

# KEYS: interaction, audit; ARGV: user, audit entry, audit cap. Takes one person's vote back from
# a pending interaction, with its audit entry; nothing when they have none there.
_WITHDRAW_VOTE = (
    LUA_READ_IX
    + LUA_DROP_VOTES
    + """
local v = redis.call('HMGET', KEYS[1], 'status', 'votes')
if not v[1] then return {0} end
if v[1] ~= 'pending' or not v[2] then return {0, read_ix(KEYS[1])} end
local kept, dropped = drop_votes(v[2], {[ARGV[1]] = true})
if dropped == 0 then return {0, read_ix(KEYS[1])} end
set_votes(KEYS[1], kept)
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, ARGV[3] - 1)
return {1, read_ix(KEYS[1])}
"""
)

_CLOSING: frozenset[str] = frozenset({"expired", "superseded", "cancelled"})


class RedisAnswers(RedisPart):
    """The answer half of `RedisStore`: every change of an interaction's answer."""

    def _register_answers(self, client: RedisClient) -> None:
        self._answer_and_claim = client.register_script(_ANSWER_AND_CLAIM)
        self._answer_under_grant = client.register_script(_ANSWER_UNDER_GRANT)
        self._close = client.register_script(_CLOSE)
        self._withdraw = client.register_script(_WITHDRAW)
        self._withdraw_vote = client.register_script(_WITHDRAW_VOTE)

    async def answer_and_claim(
        self,
        interaction_id: str,
        *,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry | Sequence[AuditEntry],
        turn: TurnClaim | None = None,
        needed: int = 1,
        stop: StopGuard | None = None,
    ) -> AnswerClaim:
        """The answer (or vote), its audit entry and (with `turn`) the run's claim and the
        thread's lease, in one script that checks `stop` first."""
        check_now(now)
        entries = vote_audits(audit, needed=needed, answer=answer)
        keys = [
            self._keys.interaction(interaction_id),
            self._keys.due,
            self._keys.settled,
            self._keys.audit,
        ]
        args: list[str | bytes | int] = [
            interaction_id,
            encode_answer(answer),
            answered_by,
            repr(float(now)),
            SETTLED_TTL,
            encode_audit(entries[-1]),
            AUDIT_CAP,
        ]
        turn_args: list[str | bytes | int] = ["", "", "", ""]
        if turn is not None or stop is not None:
            run_id = turn.run_id if turn is not None else stop.run_id if stop else ""
            where = turn.lease if turn is not None else stop
            assert where is not None
            keys += [
                self._keys.run(run_id),
                self._keys.run_interactions(run_id),
                self._keys.thread_lease(where.channel, where.thread_ts),
                self._keys.transcripts,
                self._keys.thread_stop(where.channel, where.thread_ts),
            ]
        stop_key = ""
        if stop is not None:
            stop_key = self._keys.thread_stop(stop.channel, stop.thread_ts)
            keys.append(stop_key)
        if turn is not None:
            if not turn.child_id:
                raise UsageError("`child_id` must be a non-empty run id")
            lease = turn.lease
            turn_args = [
                turn.run_id,
                turn.child_id,
                lease.owner,
                lease_millis(lease.owner, turn.lease_ttl),
            ]
        args += turn_args
        args += [
            needed,
            int(approves(answer)),
            encode_vote(Vote(user=answered_by, at=float(now))),
        ]
        args += [encode_audit(entry) for entry in entries[:-1]]
        reply = await self._send(self._answer_and_claim(keys=keys, args=args, client=self._live()))
        claim = self._interaction_claim(interaction_id, reply)
        if len(reply) == 4 and not reply[0]:
            stopped = stopped_reply(reply, 3, key=stop_key)
            return AnswerClaim(won=False, record=claim.record, stopped=stopped)
        if len(reply) == 3:
            return AnswerClaim(won=claim.won, record=claim.record, partial=True)
        if turn is None or len(reply) < 5:
            return AnswerClaim(won=claim.won, record=claim.record)
        run = decode_loaded(self._keys.run(turn.run_id), turn.run_id, reply[3:])
        lease_stop = self._keys.thread_stop(turn.lease.channel, turn.lease.thread_ts)
        kept = None if reply[2] is None else decode_stop(reply[2], key=lease_stop)
        return AnswerClaim(won=claim.won, record=claim.record, run=run, stop=kept)

    async def answer_under_grant(
        self,
        interaction_id: str,
        *,
        grant_id: str,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry,
        stop: StopGuard | None = None,
    ) -> InteractionClaim:
        """The answer and its audit entry, in one script that checks the grant (and `stop`)."""
        check_now(now)
        keys = self._keys
        guard = []
        stop_key = ""
        if stop is not None:
            stop_key = keys.thread_stop(stop.channel, stop.thread_ts)
            guard = [keys.run(stop.run_id), stop_key]
        reply = await self._send(
            self._answer_under_grant(
                keys=[
                    keys.interaction(interaction_id),
                    keys.due,
                    keys.settled,
                    keys.audit,
                    keys.grant(grant_id),
                    *guard,
                ],
                args=[
                    interaction_id,
                    encode_answer(answer),
                    answered_by,
                    repr(float(now)),
                    SETTLED_TTL,
                    encode_audit(audit),
                    AUDIT_CAP,
                ],
                client=self._live(),
            )
        )
        claim = self._interaction_claim(interaction_id, reply)
        claim.stopped = stopped_reply(reply, 3, key=stop_key)
        return claim

    async def close_interaction(
        self, interaction_id: str, *, status: InteractionStatus, now: float
    ) -> InteractionClaim:
        """Move a pending interaction to `status`; `now` is kept as its `answered_at`."""
        if status not in _CLOSING:
            raise UsageError(f"cannot close an interaction as {status!r}")
        check_now(now)
        reply = await self._send(
            self._close(
                keys=[self._keys.interaction(interaction_id), self._keys.due, self._keys.settled],
                args=[interaction_id, status, repr(float(now)), SETTLED_TTL],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)

    async def withdraw_answer(
        self,
        interaction_id: str,
        *,
        answered_by: str,
        run_id: str,
        audit: AuditEntry | Sequence[AuditEntry],
        voters: Sequence[str] | None = None,
    ) -> InteractionClaim:
        names, entries = withdrawal_audits(audit, voters=voters, answered_by=answered_by)
        reply = await self._send(
            self._withdraw(
                keys=[
                    self._keys.interaction(interaction_id),
                    self._keys.due,
                    self._keys.nudges,
                    self._keys.run(run_id),
                    self._keys.audit,
                ],
                args=[
                    interaction_id,
                    answered_by,
                    run_id,
                    AUDIT_CAP,
                    len(names),
                    *names,
                    *(encode_audit(entry) for entry in entries),
                ],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)

    async def withdraw_vote(
        self, interaction_id: str, *, user: str, audit: AuditEntry
    ) -> InteractionClaim:
        reply = await self._send(
            self._withdraw_vote(
                keys=[self._keys.interaction(interaction_id), self._keys.audit],
                args=[user, encode_audit(audit), AUDIT_CAP],
                client=self._live(),
            )
        )
        return self._interaction_claim(interaction_id, reply)
