"""Taking approvals back before a run resumes with them: the checked arguments of
`withdraw_answer` and `withdraw_vote`, and how both stores drop votes from the stored list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pydantic_core

from ._codec import encode_vote
from ._errors import CorruptRecordError
from ._records import AuditEntry, Vote

__all__ = ["LUA_DROP_VOTES", "drop_votes", "withdrawal_audits"]


def withdrawal_audits(
    audit: AuditEntry | Sequence[AuditEntry], *, voters: Sequence[str] | None, answered_by: str
) -> tuple[list[str], list[AuditEntry]]:
    """Whose approvals `withdraw_answer` takes back (`answered_by` unless `voters` says) and
    their audit entries, one each, once checked."""
    names = [answered_by] if voters is None else [str(voter) for voter in voters]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"`voters` must name distinct people, got {voters!r}")
    entries = [audit] if isinstance(audit, AuditEntry) else list(audit)
    if len(entries) != len(names):
        raise ValueError(f"{len(names)} withdrawn votes need as many audit entries, got {entries}")
    return names, entries


def drop_votes(stored: str | None, gone: Sequence[str], *, key: str) -> tuple[str | None, int, int]:
    """`(votes without those of `gone`, how many were dropped, how many there were)` of a stored
    `votes` list; None for a list left empty. The kept votes are written as `encode_vote` wrote
    them, so their times read back unrounded."""
    try:
        votes = [Vote(user=str(v["user"]), at=float(v["at"])) for v in _votes(stored)]
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRecordError(key, "votes", str(exc)) from exc
    kept = [vote for vote in votes if vote.user not in gone]
    text = ",".join(encode_vote(vote).decode() for vote in kept)
    return (f"[{text}]" if kept else None), len(votes) - len(kept), len(votes)


def _votes(stored: str | None) -> list[Any]:
    found = pydantic_core.from_json(stored) if stored else []
    if not isinstance(found, list):
        raise ValueError(f"votes are not a list: {stored!r}")
    return found


# `drop_votes` in Lua: `gone` is a set of user ids. The kept votes are copied as text, never
# re-encoded (cjson keeps 14 digits, which would round `at`), so the list is split at its
# top-level commas by a scanner that skips over strings; each vote is only decoded to read
# whose it is. Returns the new text (false when empty), how many were dropped, how many there
# were. `set_votes` stores that text (no field for none).
LUA_DROP_VOTES = r"""
local function drop_votes(stored, gone)
  local kept, dropped, total = {}, 0, 0
  local depth, quoted, escaped, start = 0, false, false, 2
  for i = 2, #stored do
    local c = string.sub(stored, i, i)
    if quoted then
      if escaped then escaped = false
      elseif c == '\\' then escaped = true
      elseif c == '"' then quoted = false end
    elseif c == '"' then quoted = true
    elseif c == '{' or c == '[' then depth = depth + 1
    elseif (c == '}' or c == ']') and depth > 0 then depth = depth - 1
    elseif depth == 0 and (c == ',' or c == ']') then
      local item = string.sub(stored, start, i - 1)
      if string.find(item, '%S') then
        total = total + 1
        if gone[cjson.decode(item).user] then
          dropped = dropped + 1
        else
          kept[#kept + 1] = item
        end
      end
      start = i + 1
    end
  end
  if #kept == 0 then return false, dropped, total end
  return '[' .. table.concat(kept, ',') .. ']', dropped, total
end
local function set_votes(ix, kept)
  if kept then redis.call('HSET', ix, 'votes', kept) else redis.call('HDEL', ix, 'votes') end
end
"""
