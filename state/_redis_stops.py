"""The stop check the Redis claim scripts share: a run's turn was stopped when its thread keeps
a stop mark other than the one the turn began under (`RunRecord.stop_seen`, `stopped_since`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._codec import decode_stop
from ._records import ThreadStop

__all__ = ["LUA_STOPPED_SINCE", "LUA_STOP_FIRST", "stopped_reply"]

# The stop mark kept at `stop` that ends the turn of the run stored at `run`, else false. A run
# without a thread (outside Slack, or saved before stops were checked) is never stopped so; one
# whose record does not read fails closed. `stop_seen` is the mark as stored, so the two compare
# as bytes and no clock decides.
LUA_STOPPED_SINCE = """
local function stopped_since(run, stop)
  local mark = redis.call('GET', stop)
  if not mark then return false end
  local rec = redis.call('HGET', run, 'rec')
  if not rec then return false end
  local ok, r = pcall(cjson.decode, rec)
  if not ok or type(r) ~= 'table' then return mark end
  if r.thread == nil or r.thread == cjson.null then return false end
  if r.stop_seen == mark then return false end
  return mark
end
"""


# Put before a save script: its last key is the thread's stop mark and its last argument the mark
# the run's turn began under ('' for none); both are taken off before the script runs, so it sees
# its own keys and arguments. A kept mark other than that one writes nothing: -1.
LUA_STOP_FIRST = """
local seen = table.remove(ARGV)
local stop_key = table.remove(KEYS)
local kept = redis.call('GET', stop_key)
if kept and kept ~= seen then return -1 end
"""


def stopped_reply(reply: Sequence[Any], at: int, *, key: str) -> ThreadStop | None:
    """The stop a script replied with at position `at`, if it did."""
    if len(reply) <= at or not reply[at]:
        return None
    return decode_stop(reply[at], key=key)
