"""The inbox on SQLite: an `inbox` table of leased rows (owner, lease_until, attempts), taken in
`BEGIN IMMEDIATE` transactions, so several processes sharing the file each get an item alone.
Enqueues that arrive together are written in one transaction (`GroupCommit`).

Rows are numbered by AUTOINCREMENT, which never reuses a number: a late `done` of an old id can
never delete a newer item. A blocking `take` polls the file (another process may enqueue) and is
woken at once by an enqueue of this process.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

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
)
from ._keys import DELIVERY_TTL
from ._sqlite_ix import IX_COLUMNS, decode_ix
from ._sqlite_part import SQLitePart
from ._sqlite_tx import transaction

__all__ = ["INBOX_POLL", "INBOX_SCHEMA", "SET_THREAD_RUN", "SQLiteInbox"]


INBOX_POLL = 0.025
"""How often (seconds) a blocking `take` looks for items another process enqueued."""

# `lease_until` is 0 until the first take, so an item is ready exactly when `lease_until <= now`;
# the two partial indexes serve the two queries of a take (new items, expired leases).
INBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    enqueued_at REAL NOT NULL,
    owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    about TEXT
);
CREATE INDEX IF NOT EXISTS inbox_waiting ON inbox (seq) WHERE owner IS NULL;
CREATE INDEX IF NOT EXISTS inbox_leased ON inbox (lease_until) WHERE owner IS NOT NULL;

CREATE TABLE IF NOT EXISTS inbox_seen (
    dedupe TEXT PRIMARY KEY,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_seen_keep_until ON inbox_seen (keep_until);
"""

SET_THREAD_RUN = """
INSERT INTO threads (channel, thread_ts, run_id, keep_until) VALUES (?, ?, ?, ?)
ON CONFLICT (channel, thread_ts) DO UPDATE SET
    run_id = excluded.run_id, keep_until = excluded.keep_until
"""

_EXPIRED = "SELECT seq FROM inbox WHERE owner IS NOT NULL AND lease_until <= ? ORDER BY seq LIMIT ?"
_WAITING = "SELECT seq FROM inbox WHERE owner IS NULL ORDER BY seq LIMIT ?"
_ANY_READY = (
    "SELECT EXISTS (SELECT 1 FROM inbox WHERE owner IS NULL)"
    " OR EXISTS (SELECT 1 FROM inbox WHERE owner IS NOT NULL AND lease_until <= ?)"
)

_INSERT = "INSERT INTO inbox (kind, body, enqueued_at, about) VALUES (?, ?, ?, ?)"

# A mark past its `keep_until` counts as unseen (pruning deletes it later).
_MARK_SEEN = """
INSERT INTO inbox_seen (dedupe, keep_until) VALUES (?, ?)
ON CONFLICT (dedupe) DO UPDATE SET keep_until = excluded.keep_until
WHERE inbox_seen.keep_until <= ?
"""


_Enqueue = tuple[str, str, str | None, str | None]
"""An item to enqueue: its kind, its encoded body, its dedupe key, the interaction it is about."""


def _enqueue(conn: sqlite3.Connection, items: Sequence[_Enqueue]) -> list[str | None]:
    """The marks and the rows of a batch in one transaction: if a row cannot be written, no
    mark is, and Slack's redelivery of the item is accepted. A second item with a dedupe key
    already in the batch is a repeat, as it would be in the next transaction."""

    def write() -> list[str | None]:
        now = time.time()
        ids: list[str | None] = []
        for kind, body, dedupe, about in items:
            if dedupe is not None:
                marked = conn.execute(_MARK_SEEN, (dedupe, now + DELIVERY_TTL, now)).rowcount
                if marked != 1:
                    ids.append(None)
                    continue
            cursor = conn.execute(_INSERT, (kind, body, now, about))
            ids.append(str(cursor.lastrowid))
        return ids

    return transaction(conn, write)


def _lease(conn: sqlite3.Connection, seqs: list[int], *, consumer: str, until: float) -> list[Any]:
    """The rows `seqs` leased to `consumer` until `until`, in the order of `seqs`, each with the
    row of the interaction it is about (or None), read in the same transaction."""
    if not seqs:
        return []
    marks = ", ".join("?" * len(seqs))
    rows = conn.execute(
        "UPDATE inbox SET owner = ?, lease_until = ?, attempts = attempts + 1"
        f" WHERE seq IN ({marks}) RETURNING seq, kind, body, attempts, enqueued_at, about",
        (consumer, until, *seqs),
    ).fetchall()
    order = {seq: index for index, seq in enumerate(seqs)}
    about = sorted({row[5] for row in rows if row[5] is not None})
    found: dict[str, Any] = {}
    if about:
        wanted = ", ".join("?" * len(about))
        for ix in conn.execute(
            f"SELECT {IX_COLUMNS} FROM interactions WHERE interaction_id IN ({wanted})", about
        ):
            found[ix[0]] = ix
    return [(*row, found.get(row[5])) for row in sorted(rows, key=lambda row: order[row[0]])]


def _take(conn: sqlite3.Connection, consumer: str, count: int, lease: float) -> list[Any]:
    """Expired leases first, then new items, each in enqueue order; leased to `consumer`."""
    # A read first, outside any write lock: polling an empty inbox never makes writers wait.
    if not conn.execute(_ANY_READY, (time.time(),)).fetchone()[0]:
        return []

    def lease_rows() -> list[Any]:
        now = time.time()
        seqs = [row[0] for row in conn.execute(_EXPIRED, (now, count))]
        if len(seqs) < count:
            seqs += [row[0] for row in conn.execute(_WAITING, (count - len(seqs),))]
        return _lease(conn, seqs, consumer=consumer, until=now + lease)

    return transaction(conn, lease_rows)


def _extend(conn: sqlite3.Connection, consumer: str, seqs: list[int], lease: float) -> set[int]:
    marks = ", ".join("?" * len(seqs))
    rows = conn.execute(
        f"UPDATE inbox SET lease_until = ? WHERE owner = ? AND seq IN ({marks}) RETURNING seq",
        (time.time() + lease, consumer, *seqs),
    ).fetchall()
    return {row[0] for row in rows}


def _is_row_id(item_id: str) -> bool:
    return item_id.isascii() and item_id.isdigit()


class SQLiteInbox(SQLitePart):
    """The `Inbox` half of `SQLiteStore`; each call is one function on the store's worker."""

    _inbox_waiters: set[asyncio.Event]
    _enqueues: GroupCommit[_Enqueue, str | None]

    def _init_inbox(self) -> None:
        self._inbox_waiters = set()
        self._enqueues = GroupCommit(self._write_enqueues)

    async def enqueue(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        dedupe: str | None = None,
        about: str | None = None,
    ) -> str | None:
        """Written with the enqueues that arrive with it, in one transaction; the interaction
        it is `about` is read when it is taken (in the transaction that leases it)."""
        check_dedupe(kind, dedupe, about)
        return await self._enqueues.submit((kind, encode_body(body), dedupe, about))

    async def _write_enqueues(self, items: Sequence[_Enqueue]) -> list[str | None]:
        item_ids = await self._call(partial(_enqueue, items=items))
        # A blocking take of this process looks again at once.
        if any(item_id is not None for item_id in item_ids):
            for waiter in self._inbox_waiters:
                waiter.set()
        return item_ids

    async def take(
        self, consumer: str, *, count: int = 16, lease: float = 5.0, block: float = 0.0
    ) -> list[WorkItem]:
        """Polls every `INBOX_POLL` seconds while blocking; an enqueue here wakes it at once."""
        check_take(consumer, count, lease, block)
        deadline = time.monotonic() + block
        waiter = asyncio.Event()
        self._inbox_waiters.add(waiter)
        try:
            while True:
                # Cleared before looking, so an enqueue during the look still wakes the wait.
                waiter.clear()
                rows = await self._call(partial(_take, consumer=consumer, count=count, lease=lease))
                remaining = deadline - time.monotonic()
                if rows or remaining <= 0:
                    return [_item(row) for row in rows]
                try:
                    async with asyncio.timeout(min(INBOX_POLL, remaining)):
                        await waiter.wait()
                except TimeoutError:
                    pass
        finally:
            self._inbox_waiters.discard(waiter)

    async def extend(self, consumer: str, item_ids: Sequence[str], *, lease: float) -> list[str]:
        """Renews only rows `consumer` still owns (an expired lease nobody took yet counts)."""
        check_consumer(consumer)
        seconds = lease_seconds(lease)
        check_item_ids(item_ids, valid=_is_row_id, store="SQLite")
        if not item_ids:
            return []
        seqs = [int(item_id) for item_id in item_ids]
        held = await self._call(partial(_extend, consumer=consumer, seqs=seqs, lease=seconds))
        return [item_id for item_id, seq in zip(item_ids, seqs, strict=True) if seq in held]

    async def done(self, item_id: str) -> None:
        """The row deleted; an id already gone is a no-op."""
        check_item_ids([item_id], valid=_is_row_id, store="SQLite")
        seq = int(item_id)
        await self._call(lambda conn: conn.execute("DELETE FROM inbox WHERE seq = ?", (seq,)))

    async def inbox_size(self) -> int:
        row = await self._call(lambda conn: conn.execute("SELECT count(*) FROM inbox").fetchone())
        return int(row[0])


def _item(row: tuple[Any, ...]) -> WorkItem:
    seq, kind, body, attempts, enqueued_at, about, stored = row
    interaction = None
    if stored is not None:
        try:
            interaction = decode_ix(stored)
        except CorruptRecordError:
            # The item stays workable: its worker reads the interaction itself, and meets the
            # corrupt record where a click always has (refused, logged).
            about = None
    return WorkItem(
        item_id=str(seq),
        kind=kind,
        body=decode_body(body, key=f"inbox/{seq}"),
        attempts=int(attempts),
        enqueued_at=float(enqueued_at),
        about=about,
        interaction=interaction,
    )
