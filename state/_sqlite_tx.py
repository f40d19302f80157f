"""The write transaction every multi-statement SQLite operation runs in."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

__all__ = ["transaction"]

_T = TypeVar("_T")


def transaction(conn: sqlite3.Connection, work: Callable[[], _T]) -> _T:
    """Run `work` holding the write lock from the start, so concurrent processes queue.

    Whatever fails, the connection leaves the transaction: a failed COMMIT keeps it open, and a
    connection stuck inside one would refuse every later `BEGIN`. SQLite itself rolls back after
    some errors (a full disk, an I/O error), when a second ROLLBACK would hide the real error.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
