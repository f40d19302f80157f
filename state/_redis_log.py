"""The transcript log of layout-2 runs on Redis: the Lua that appends a run's messages to its log
and reads them back (in the script that reads the run), and decoding what such a script read."""

from __future__ import annotations

from typing import Any

from ._codec import decode_run, is_layout2, text
from ._errors import CorruptRecordError
from ._records import RunRecord

__all__ = ["LOG_PLACEHOLDER", "LUA_READ_LOG", "SAVE_APPENDED", "decode_loaded"]

# Transcript logs live in one hash (`RedisKeys.transcripts`): a script reads the log a record
# names through field names it builds, never through a key it was not given. Chunks are the
# messages one save appended, joined by newlines; they sit end to end from position 0.
_CHUNKS = r"""
local function split(chunk)
  local out, at = {}, 1
  while true do
    local nl = string.find(chunk, '\n', at, true)
    if not nl then out[#out + 1] = string.sub(chunk, at); return out end
    out[#out + 1] = string.sub(chunk, at, nl - 1)
    at = nl + 1
  end
end
local function count(chunk)
  local n, at = 1, string.find(chunk, '\n', 1, true)
  while at do n, at = n + 1, string.find(chunk, '\n', at + 1, true) end
  return n
end
local function chunk_at(tx, id, pos)
  return redis.call('HGET', tx, string.format('%s:%d', id, pos))
end
"""

# KEYS: the run, transcripts, transcripts-keep; ARGV: the log's name, the record's JSON (its log
# number a placeholder 0), status, resumed_by, TTL, base, then the run's own messages.
# The messages the log already holds from `base` on must be these very ones (an earlier save of
# this run: the journal, a retry), and only the rest is appended; any other message there (a
# second run continued from the same parent) refuses the save (0) and writes nothing, so a log
# position, once written, never changes under a run that uses it. A few logs whose every run has
# expired are deleted on the way (hash fields have no TTL of their own on Redis 7.0).
SAVE_APPENDED = (
    _CHUNKS
    + r"""
local tx, keep = KEYS[2], KEYS[3]
local name_field = string.format('log:%s', ARGV[1])
local id = redis.call('HGET', tx, name_field)
local len = 0
if id then len = tonumber(redis.call('HGET', tx, string.format('#%s', id)) or '0') end
local base, own = tonumber(ARGV[6]), #ARGV - 6
if len < base then return 0 end
local have = math.min(len - base, own)
local pos, done = base, 0
while done < have do
  local chunk = chunk_at(tx, id, pos)
  if not chunk then return 0 end
  local messages = split(chunk)
  for i = 1, #messages do
    if done == have then break end
    done = done + 1
    if messages[i] ~= ARGV[6 + done] then return 0 end
  end
  pos = pos + #messages
end
if not id then
  id = tostring(redis.call('HINCRBY', tx, 'next', 1))
  redis.call('HSET', tx, name_field, id, string.format('@%s', id), ARGV[1])
end
if have < own then
  redis.call('HSET', tx, string.format('%s:%d', id, len), table.concat(ARGV, '\n', 7 + have),
             string.format('#%s', id), len + own - have)
end
local now = tonumber(redis.call('TIME')[1])
redis.call('ZADD', keep, now + tonumber(ARGV[5]), id)
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', keep, '-inf', now, 'LIMIT', 0, 2)) do
  local at = 0
  while true do
    local chunk = chunk_at(tx, dead, at)
    if not chunk then break end
    redis.call('HDEL', tx, string.format('%s:%d', dead, at))
    at = at + count(chunk)
  end
  local dead_name = redis.call('HGET', tx, string.format('@%s', dead))
  if dead_name then redis.call('HDEL', tx, string.format('log:%s', dead_name)) end
  redis.call('HDEL', tx, string.format('#%s', dead), string.format('@%s', dead))
  redis.call('ZREM', keep, dead)
end
local rec = string.format('{"layout":2,"log":%s,%s', id, string.sub(ARGV[2], 21))
redis.call('HSET', KEYS[1], 'rec', rec, 'status', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSETNX', KEYS[1], 'resumed_by', ARGV[4]) end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
)

# KEYS: the run, transcripts. A layout-2 record comes back with the name of its log and the
# chunks of the log up to its `length`, joined by newlines (cjson only reads the small layout-2
# record, never re-encodes it).
# A layout-2 record's transcript, read from its log in the script that reads the record (a resume
# reads what it needs in one round trip): the log's name and its messages as one string (rather
# than a reply per chunk: the client splits it as it would the chunks); nil for layout 1.
LUA_READ_LOG = (
    _CHUNKS
    + r"""
local function read_log(stored, transcripts)
  if string.sub(stored, 1, 12) ~= '{"layout":2,' then return nil end
  local ok, rec = pcall(cjson.decode, stored)
  if not ok or type(rec) ~= 'table' or type(rec.log) ~= 'number'
     or type(rec.length) ~= 'number' then
    return nil
  end
  local id = string.format('%d', rec.log)
  local chunks, pos = {}, 0
  while pos < rec.length do
    local chunk = chunk_at(transcripts, id, pos)
    if not chunk then break end
    chunks[#chunks + 1] = chunk
    pos = pos + count(chunk)
  end
  return {redis.call('HGET', transcripts, string.format('@%s', id)), table.concat(chunks, '\n')}
end
"""
)

LOG_PLACEHOLDER = b'{"layout":2,"log":0,'
"""How `encode_run(run, log=0)` starts; the save script puts the log's number in place of 0."""


def decode_loaded(key: str, run_id: str, reply: list[Any]) -> RunRecord:
    """The run of a script that read it with `read_log`: record, resumed_by, and for layout 2
    the log's name and its messages."""
    rec, resumed_by = reply[0], reply[1]
    if not is_layout2(rec):
        return decode_run(rec, key=key, run_id=run_id, resumed_by=resumed_by)
    if len(reply) < 4 or reply[2] is None:
        raise CorruptRecordError(key, "run", "it names no readable transcript log")
    return decode_run(
        rec,
        key=key,
        run_id=run_id,
        resumed_by=resumed_by,
        transcript=[reply[3]] if reply[3] else [],
        log_name=text(reply[2]),
    )
