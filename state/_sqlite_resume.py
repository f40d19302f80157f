"""The claim a resume makes on SQLite when it has not read the run yet: the claim and the read in
one transaction (`claim_run(read=True)`), and giving the claim back when the resume then refuses
its answers (`release_run`)."""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from typing import Any

from ._records import RunClaim, RunRecord, StopGuard
from ._sqlite_answers import decode_stop_row, stop_row
from ._sqlite_log import LOAD_RUN, decode_loaded
from ._sqlite_part import SQLitePart
from ._sqlite_tx import transaction

__all__ = ["SQLiteResumes"]

_CLAIM = (
    "UPDATE runs SET resumed_by = ? WHERE run_id = ? AND status = 'paused'"
    " AND (resumed_by IS NULL OR resumed_by = ?)"
)

_RELEASE = (
    "UPDATE runs SET resumed_by = NULL WHERE run_id = ? AND status = 'paused' AND resumed_by = ?"
)


class SQLiteResumes(SQLitePart):
    """`claim_run(read=True)` and `release_run` of `SQLiteStore`."""

    async def _claim_read(self, run_id: str, child_id: str) -> RunClaim:
        won, run, mark, guard = await self._call(
            lambda conn: transaction(conn, partial(_claim_read, conn, run_id, child_id))
        )
        stopped = None if guard is None else decode_stop_row(mark, guard.channel, guard.thread_ts)
        return RunClaim(won=won, run=run, stopped=stopped)

    async def release_run(self, run_id: str, *, child_id: str) -> bool:
        released: int = await self._call(
            lambda conn: conn.execute(_RELEASE, (run_id, child_id)).rowcount
        )
        return released == 1


def _claim_read(
    conn: sqlite3.Connection, run_id: str, child_id: str
) -> tuple[bool, RunRecord | None, Any, StopGuard | None]:
    """Inside the write transaction: the run read (a record that does not decode fails here and
    rolls back, so no claim is left on a run nobody can resume), its own turn's stop checked as
    the guard its thread names, then the claim."""
    run = decode_loaded(run_id, conn.execute(LOAD_RUN, (run_id,)).fetchall())
    if run is None:
        return False, None, None, None
    guard = None
    if run.thread is not None:
        guard = StopGuard(run_id=run_id, channel=run.thread[0], thread_ts=run.thread[1])
    if run.status == "paused" and run.resumed_by is None:
        mark = stop_row(conn, guard, time.time())
        if mark is not None:
            return False, run, mark, guard
    won = conn.execute(_CLAIM, (child_id, run_id, child_id)).rowcount == 1
    if won:
        run.resumed_by = child_id
    return won, run, None, guard
