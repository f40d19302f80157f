"""The inbox on Redis: one stream read through one consumer group, so Redis itself leases items
(the group's pending entries list), counts their deliveries and hands expired leases to another
consumer (XAUTOCLAIM). A lease is the server's idle time of the pending entry: it ends `lease`
seconds (the *taker's* `lease`, so every process should use the same one) after the last take or
heartbeat (XCLAIM resets it), by the server's clock. Enqueues that arrive together are written
by one script call (`GroupCommit`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._codec import text
from ._errors import CorruptRecordError
from ._group_commit import GroupCommit
from ._inbox import (
    WorkItem,
    check_consumer,
    check_dedupe,
    check_item_ids,
    check_take,
    decode_body,
    encode_body,
    lease_seconds,
    millis,
)
from ._keys import DELIVERY_TTL, INBOX_GROUP
from ._records import InteractionRecord
from ._redis_cluster import RedisClient
from ._redis_ix import IX_FIELDS, LUA_READ_IX
from ._redis_part import RedisPart

__all__ = ["RedisInbox"]


_ENTRY_ID = re.compile(r"\d+-\d+")

_Enqueue = tuple[str, str, str | None, str | None]
"""An item to enqueue: its kind, its encoded body, its dedupe key, the interaction it is about."""

# The group starts at id 0, not `$`: items enqueued before any consumer ever took (a fresh Redis,
# workers started after the app) must be delivered too. Entries leave the stream when done, so
# starting from 0 replays nothing finished. Creating it on every take and heartbeat (BUSYGROUP
# once it exists, ignored) keeps the inbox working after its key was deleted.
_ENSURE_GROUP = "redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')\n"

# KEYS: the stream, then the dedupe marks and the interactions of the batch; ARGV: the marks'
# TTL, then per item its kind, its body, and the index in KEYS of its mark and of the
# interaction it is about (0: none). An item's XADD is its first write: if Redis refuses the
# batch's first write (out of memory), the script stops having written nothing, so no mark is
# left for an item that was not recorded and Slack's redelivery of it is accepted. A mark is
# checked before and set after its item; a script runs alone, so no other enqueue can come in
# between, and a second item of the batch with the same mark is a repeat. The interaction an
# item is about rides in the entry (`ix`: its fields as `read_ix` reads them, JSON), so whoever
# takes the item has it without reading it again.
_ENQUEUE = (
    LUA_READ_IX
    + """
local ids = {}
for i = 2, #ARGV, 4 do
  local mark, about = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  if mark > 0 and redis.call('EXISTS', KEYS[mark]) == 1 then
    ids[#ids + 1] = false
  else
    if about > 0 then
      ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'kind', ARGV[i], 'body', ARGV[i + 1],
                                 'about', KEYS[about], 'ix', cjson.encode(read_ix(KEYS[about])))
    else
      ids[#ids + 1] = redis.call('XADD', KEYS[1], '*', 'kind', ARGV[i], 'body', ARGV[i + 1])
    end
    if mark > 0 then redis.call('SET', KEYS[mark], '1', 'NX', 'EX', ARGV[1]) end
  end
end
return ids
"""
)

# ARGV: group, consumer, count, lease in ms. Expired leases first (their deliveries counted by
# XAUTOCLAIM and read back from XPENDING), then new entries. Entries deleted while pending come
# back apart (Redis 7) or with no fields (6.2); acking them drops them from the group for good.
# No BLOCK here: a script never waits, so a blocking read, when needed, is a second call.
_TAKE = (
    _ENSURE_GROUP
    + """
local group, consumer, count = ARGV[1], ARGV[2], tonumber(ARGV[3])
local taken, gone, cursor = {}, {}, '0-0'
repeat
  local r = redis.call('XAUTOCLAIM', KEYS[1], group, consumer, ARGV[4], cursor,
                       'COUNT', count - #taken)
  cursor = r[1]
  for _, e in ipairs(r[2]) do
    if e[2] then
      local p = redis.call('XPENDING', KEYS[1], group, e[1], e[1], 1)
      taken[#taken + 1] = {e[1], e[2], p[1][4]}
    else
      gone[#gone + 1] = e[1]
    end
  end
  for _, id in ipairs(r[3] or {}) do gone[#gone + 1] = id end
until cursor == '0-0' or #taken >= count
if #gone > 0 then redis.call('XACK', KEYS[1], group, unpack(gone)) end
if #taken < count then
  local r = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count - #taken,
                       'STREAMS', KEYS[1], '>')
  if r then
    for _, e in ipairs(r[1][2]) do taken[#taken + 1] = {e[1], e[2], 1} end
  end
end
return taken
"""
)

# ARGV: group, consumer, then ids. XCLAIM would take an entry from any consumer, so it is only
# sent for entries still pending for this one; JUSTID leaves their delivery count alone.
_EXTEND = (
    _ENSURE_GROUP
    + """
local held = {}
for i = 3, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #p > 0 and #redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID') > 0 then
    held[#held + 1] = ARGV[i]
  end
end
return held
"""
)

# KEYS: the stream; ARGV: group, id. A script rather than a MULTI pipeline: atomic and one round
# trip on a single Redis and on a cluster alike.
_DONE = """
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
return 1
"""


def _is_entry_id(item_id: str) -> bool:
    return _ENTRY_ID.fullmatch(item_id) is not None


class RedisInbox(RedisPart):
    """The `Inbox` half of `RedisStore`; every call is one round trip (a `take` that finds
    nothing and may block makes a second one, the blocking XREADGROUP)."""

    _enqueues: GroupCommit[_Enqueue, str | None]

    def _register_inbox(self, client: RedisClient) -> None:
        self._enqueue_script = client.register_script(_ENQUEUE)
        self._take_script = client.register_script(_TAKE)
        self._extend_script = client.register_script(_EXTEND)
        self._done_script = client.register_script(_DONE)
        self._enqueues = GroupCommit(self._write_enqueues)

    async def enqueue(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        dedupe: str | None = None,
        about: str | None = None,
    ) -> str | None:
        """XADD, with the dedupe mark (SET EX `DELIVERY_TTL`) and the read of the interaction
        it is `about` in the same script, which also writes the enqueues that arrive with this
        one."""
        check_dedupe(kind, dedupe, about)
        return await self._enqueues.submit((kind, encode_body(body), dedupe, about))

    async def _write_enqueues(self, items: Sequence[_Enqueue]) -> list[str | None]:
        keys = [self._keys.inbox]
        args: list[str | int] = [DELIVERY_TTL]
        for kind, body, dedupe, about in items:
            mark = ix = 0
            if dedupe is not None:
                keys.append(self._keys.inbox_seen(dedupe))
                mark = len(keys)
            if about is not None:
                keys.append(self._keys.interaction(about))
                ix = len(keys)
            args += [kind, body, mark, ix]
        item_ids = await self._send(self._enqueue_script(keys=keys, args=args, client=self._live()))
        return [None if item_id is None else text(item_id) for item_id in item_ids]

    async def take(
        self, consumer: str, *, count: int = 16, lease: float = 5.0, block: float = 0.0
    ) -> list[WorkItem]:
        """XAUTOCLAIM (min-idle = `lease`) then XREADGROUP `>`, in one script; when that finds
        nothing and `block` > 0, a blocking XREADGROUP for new items."""
        check_take(consumer, count, lease, block)
        reply = await self._send(
            self._take_script(
                keys=[self._keys.inbox],
                args=[INBOX_GROUP, consumer, count, millis(lease)],
                client=self._live(),
            )
        )
        items = [self._item(entry[0], entry[1], int(entry[2])) for entry in reply]
        if items or block <= 0:
            return items
        read = await self._send(
            self._live().xreadgroup(
                INBOX_GROUP,
                consumer,
                {self._keys.inbox: ">"},
                count=count,
                block=millis(block),
            )
        )
        return [self._item(entry_id, fields, 1) for entry_id, fields in _stream_entries(read)]

    async def extend(self, consumer: str, item_ids: Sequence[str], *, lease: float) -> list[str]:
        """XCLAIM JUSTID (idle time back to 0) of the ids still pending for `consumer`. The lease
        then runs for the next taker's `lease`, which is why every process should use one."""
        check_consumer(consumer)
        lease_seconds(lease)
        check_item_ids(item_ids, valid=_is_entry_id, store="Redis")
        if not item_ids:
            return []
        reply = await self._send(
            self._extend_script(
                keys=[self._keys.inbox],
                args=[INBOX_GROUP, consumer, *item_ids],
                client=self._live(),
            )
        )
        return [text(item_id) for item_id in reply]

    async def done(self, item_id: str) -> None:
        """XACK + XDEL in one script (one round trip); an id already gone is a no-op."""
        check_item_ids([item_id], valid=_is_entry_id, store="Redis")
        await self._send(
            self._done_script(
                keys=[self._keys.inbox], args=[INBOX_GROUP, item_id], client=self._live()
            )
        )

    async def inbox_size(self) -> int:
        """XLEN: done items are deleted, so the stream holds exactly the ones not done."""
        return int(await self._send(self._live().xlen(self._keys.inbox)))

    def _item(self, entry_id: Any, fields: Any, attempts: int) -> WorkItem:
        item_id = text(entry_id)
        key = f"{self._keys.inbox}/{item_id}"
        values = _fields(fields)
        kind, body = values.get("kind"), values.get("body")
        if kind is None or body is None:
            raise CorruptRecordError(key, "work item", "its entry has no `kind` or `body`")
        about, interaction = None, None
        if "about" in values:
            about = values["about"].removeprefix(self._keys.interaction(""))
            try:
                interaction = self._ix_of(about, values.get("ix"), key=key)
            except CorruptRecordError:
                # The item stays workable: its worker reads the interaction itself, and meets
                # the corrupt record where a click always has (refused, logged), instead of
                # every take failing on this entry.
                about = None
        return WorkItem(
            item_id=item_id,
            kind=kind,
            body=decode_body(body, key=key),
            attempts=attempts,
            # The entry id is the server's clock in milliseconds when it was added.
            enqueued_at=int(item_id.split("-", 1)[0]) / 1000,
            about=about,
            interaction=interaction,
        )

    def _ix_of(self, about: str, data: str | None, *, key: str) -> InteractionRecord | None:
        """The interaction an entry carries: `read_ix`'s values as the enqueue found them
        (JSON; `false` for a field the hash did not have), None when it had no such hash."""
        try:
            values = json.loads(data) if data is not None else None
        except ValueError as exc:
            raise CorruptRecordError(key, "work item", f"its `ix` is not JSON: {exc}") from exc
        if not isinstance(values, list) or len(values) != len(IX_FIELDS):
            raise CorruptRecordError(key, "work item", "its `ix` is not an interaction's fields")
        if values[0] is False:
            return None  # No such interaction when the item was added.
        return self._decode_ix(about, [None if value is False else value for value in values])


def _fields(fields: Any) -> dict[str, str]:
    """An entry's fields, as a flat list (from a script) or a mapping (parsed by redis-py)."""
    if isinstance(fields, Mapping):
        return {text(name): text(value) for name, value in fields.items()}
    return {text(fields[i]): text(fields[i + 1]) for i in range(0, len(fields) - 1, 2)}


def _stream_entries(reply: Any) -> list[tuple[Any, Any]]:
    """The entries of a one-stream XREADGROUP reply as redis-py parses it: `[[name, entries]]`
    (RESP2), `{name: entries}` or `{name: [entries]}` (RESP3, by redis-py version); a timeout
    gives nothing."""
    if not reply:
        return []
    streams = reply.values() if isinstance(reply, Mapping) else (stream[1] for stream in reply)
    found: list[tuple[Any, Any]] = []
    for entries in streams:
        if entries and isinstance(entries[0], list):
            entries = entries[0]
        found.extend((entry[0], entry[1]) for entry in entries if entry[0] is not None)
    return found
