"""The write transaction every multi-statement SQLite operation runs in, and the audit append
several of them make inside it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TypeVar

from ._keys import AUDIT_CAP

__all__ = ["append_audit", "transaction"]

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


def append_audit(conn: sqlite3.Connection, rec: str) -> None:
    """Add an audit entry (its JSON), dropping the oldest beyond `AUDIT_CAP`."""
    newest = conn.execute("INSERT INTO audit (rec) VALUES (?)", (rec,)).lastrowid
    if newest is not None and newest > AUDIT_CAP:
        conn.execute("DELETE FROM audit WHERE id <= ?", (newest - AUDIT_CAP,))
