"""The claim a resume makes on Redis when it has not read the run yet: the claim and the read in
one script (`claim_run(read=True)`), and giving the claim back when the resume then refuses its
answers (`release_run`)."""

from __future__ import annotations

from ._codec import text
from ._keys import SETTLED_TTL
from ._records import RunClaim
from ._redis_cluster import RedisClient
from ._redis_log import LUA_READ_LOG, decode_loaded
from ._redis_part import RedisPart
from ._redis_stops import LUA_STOPPED_SINCE, stopped_reply

__all__ = ["RedisResumes"]

# KEYS: run, settled, transcripts, and once the caller knows the run's thread (from a reply {2,
# channel, thread_ts}) that thread's stop mark. ARGV: child, run id. Replies {0} for no run, else
# {won, rec, resumed_by, stop mark or false, and for layout 2 the log's name and messages}. A
# record that does not read back (its JSON, its thread, its log) is not claimed: the caller's
# decoding then fails on it, and no claim is left behind on a run nobody can resume. An unclaimed
# run in a thread is claimed only with the thread's stop mark among the keys, so every key the
# script touches is one it was given (a cluster routes by them).
_CLAIM_READ = (
    LUA_READ_LOG
    + LUA_STOPPED_SINCE
    + r"""
local v = redis.call('HMGET', KEYS[1], 'rec', 'status', 'resumed_by')
if not v[1] then return {0} end
local ok, r = pcall(cjson.decode, v[1])
local log = read_log(v[1], KEYS[3])
local function reply(won, resumed_by, mark)
  local out = {won, v[1], resumed_by or false, mark or false}
  if log then out[5], out[6] = log[1] or false, log[2] end
  return out
end
if not ok or type(r) ~= 'table' then return reply(0, v[3]) end
if string.sub(v[1], 1, 12) == '{"layout":2,' and not (log and log[1]) then
  return reply(0, v[3])
end
local thread = r.thread
if thread == cjson.null then thread = nil end
if thread ~= nil and (type(thread) ~= 'table' or type(thread[1]) ~= 'string'
                      or type(thread[2]) ~= 'string') then
  return reply(0, v[3])
end
if v[2] == 'paused' and not v[3] and thread ~= nil then
  if not KEYS[4] then return {2, thread[1], thread[2]} end
  local mark = stopped_since(KEYS[1], KEYS[4])
  if mark then return reply(0, v[3], mark) end
end
if v[2] == 'paused' and (not v[3] or v[3] == ARGV[1]) then
  redis.call('HSET', KEYS[1], 'resumed_by', ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[2])
  return reply(1, ARGV[1])
end
return reply(0, v[3])
"""
)

# KEYS: run, settled. ARGV: child, run id, settled TTL. The run goes back to the settled index:
# whether it was there before is not known, and `settled_runs` decides by what it reads, so an
# entry too many costs a read where one too few would leave a settled run unresumed.
_RELEASE = """
local v = redis.call('HMGET', KEYS[1], 'status', 'resumed_by')
if v[1] ~= 'paused' or v[2] ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'resumed_by')
redis.call('ZADD', KEYS[2], 0, ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
"""


class RedisResumes(RedisPart):
    """`claim_run(read=True)` and `release_run` of `RedisStore`."""

    def _register_resumes(self, client: RedisClient) -> None:
        self._claim_read_script = client.register_script(_CLAIM_READ)
        self._release_script = client.register_script(_RELEASE)

    async def _claim_read(self, run_id: str, child_id: str) -> RunClaim:
        key = self._keys.run(run_id)
        keys = [key, self._keys.settled, self._keys.transcripts]
        args = [child_id, run_id]
        reply = await self._send(self._claim_read_script(keys=keys, args=args, client=self._live()))
        stop_key = ""
        if reply[0] == 2:
            # In a thread: again with its stop mark, read and checked in the claim's own step.
            stop_key = self._keys.thread_stop(text(reply[1]), text(reply[2]))
            reply = await self._send(
                self._claim_read_script(keys=[*keys, stop_key], args=args, client=self._live())
            )
        if len(reply) == 1:
            return RunClaim(won=False, run=None)
        run = decode_loaded(key, run_id, [reply[1], reply[2], *reply[4:]])
        return RunClaim(won=bool(reply[0]), run=run, stopped=stopped_reply(reply, 3, key=stop_key))

    async def release_run(self, run_id: str, *, child_id: str) -> bool:
        reply = await self._send(
            self._release_script(
                keys=[self._keys.run(run_id), self._keys.settled],
                args=[child_id, run_id, SETTLED_TTL],
                client=self._live(),
            )
        )
        return bool(reply)
