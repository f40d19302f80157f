"""The heartbeat on SQLite: a connection of its own to the store's file (the store's own one
serves its database thread) and one transaction that renews what the process holds."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ._beat import Held, Lost, check_held
from ._errors import StoreError
from ._sqlite_tx import transaction

__all__ = ["SQLiteHeartbeat"]

_T = TypeVar("_T")

Runner = Callable[[Callable[[sqlite3.Connection], _T]], _T]


def _renew(conn: sqlite3.Connection, held: Held, ttl: float) -> Lost:
    """Leases move to `now + ttl` only while still the process's (an item it owns, a thread
    lease its owner holds); an item's row past its lease that nobody took yet still counts, as
    for `extend`."""

    def renew() -> Lost:
        until = time.time() + ttl
        seqs = sorted({int(item) for item in held.items})
        kept: set[int] = set()
        if seqs:
            marks = ", ".join("?" * len(seqs))
            kept = {
                row[0]
                for row in conn.execute(
                    f"UPDATE inbox SET lease_until = ? WHERE owner = ? AND seq IN ({marks})"
                    " RETURNING seq",
                    (until, held.consumer, *seqs),
                )
            }
        lost_threads = tuple(
            lease
            for lease in held.threads
            if conn.execute(
                "UPDATE thread_leases SET keep_until = ?"
                " WHERE channel = ? AND thread_ts = ? AND owner = ?",
                (until, lease.channel, lease.thread_ts, lease.owner),
            ).rowcount
            != 1
        )
        lost_items = tuple(item for item in held.items if int(item) not in kept)
        return Lost(items=lost_items, threads=lost_threads)

    return transaction(conn, renew)


class SQLiteHeartbeat:
    """`Heartbeat` on SQLite: `run` calls a function with the connection to use (its own, or
    for an in-memory store, which no second connection can see, the store's, on its database
    thread)."""

    def __init__(self, run: Runner[Lost], close: Callable[[], None], path: str) -> None:
        self._run = run
        self._close = close
        self._path = path
        self._closed = False

    @classmethod
    def on_file(cls, path: str, *, busy_timeout: float) -> SQLiteHeartbeat:
        try:
            conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
        except sqlite3.Error as exc:
            raise StoreError(f"the heartbeat cannot open SQLite database {path!r}: {exc}") from exc
        lock = threading.Lock()

        def run(work: Callable[[sqlite3.Connection], Lost]) -> Lost:
            with lock:
                return work(conn)

        return cls(run, conn.close, path)

    def beat(self, held: Held, *, ttl: float) -> Lost:
        seconds = check_held(held, ttl)
        try:
            return self._run(lambda conn: _renew(conn, held, seconds))
        except sqlite3.Error as exc:
            raise StoreError(f"the heartbeat on {self._path!r} failed: {exc}") from exc

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()
