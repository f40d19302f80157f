"""Writes made on the event loop's own thread, for a caller that must act in the same breath as
the commit: the journal's "started" mark, after which the tool's handler is called at once.

The store's other calls run on its database thread, and the loop hears of their commit a turn or
more later (`call_soon_threadsafe`, behind whatever else a busy loop has queued); a process
killed in that gap leaves a call marked started that never began, and its thread is told it
"may or may not have taken effect". Here the commit and `then` are one synchronous stretch of
the loop's thread. The loop must never wait on another process's lock, so this connection has
no busy timeout: a file whose write lock is held is tried again a moment later, from the loop,
and nothing is written in the meantime (a kill then leaves no mark, and the retry runs the call).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from ._errors import StoreClosedError
from ._sqlite_tx import transaction
from ._url import Synchronous

__all__ = ["LoopWriter"]

_T = TypeVar("_T")

_FIRST_RETRY = 0.001
_LAST_RETRY = 0.02
"""Seconds between tries while the file is locked, doubling from the first to the last: the
locks this waits for are other commits, a millisecond or so each."""


class LoopWriter:
    """A connection of its own to the store's file, used only on the event loop's thread.

    Opened at the first write (on the loop's thread, which is the only one that may use it) and
    closed by `close`. It never checkpoints the WAL itself (`wal_autocheckpoint = 0`): a
    checkpoint copies pages into the database and syncs it, which the store's database thread
    does after its own commits, away from the loop.
    """

    def __init__(self, path: str, *, synchronous: Synchronous, busy_timeout: float) -> None:
        self._path = path
        self._synchronous: Synchronous = synchronous
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    async def write(
        self, work: Callable[[sqlite3.Connection], _T], then: Callable[[_T], None]
    ) -> _T:
        """`work(conn)` in one write transaction, and `then(result)` right after its commit.

        A file locked by another writer is tried again until `busy_timeout` seconds have
        passed, as the store's own connection would wait, and then fails as it would
        (`sqlite3.OperationalError`, database is locked).
        """
        deadline = time.monotonic() + self._busy_timeout
        delay = _FIRST_RETRY
        while True:
            try:
                result = transaction(self._open(), lambda: work(self._open()))
            except sqlite3.OperationalError as exc:
                if not _busy(exc) or time.monotonic() >= deadline:
                    raise
            else:
                then(result)
                return result
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_RETRY)

    def close(self) -> None:
        """Close the connection; a write still waiting for the lock then fails."""
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _open(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosedError(f"the SQLite store on {self._path!r} is closed")
        if self._conn is None:
            conn = sqlite3.connect(self._path, isolation_level=None, timeout=0)
            try:
                conn.execute("PRAGMA busy_timeout = 0")
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn


def _busy(exc: sqlite3.OperationalError) -> bool:
    # The extended codes (SQLITE_BUSY_RECOVERY, _SNAPSHOT, _TIMEOUT) share the primary's low byte.
    return (exc.sqlite_errorcode & 0xFF) == sqlite3.SQLITE_BUSY
