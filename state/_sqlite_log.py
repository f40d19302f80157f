"""Runs' rows and the transcript log of layout-2 runs on SQLite: the statements that write a run
and read it back with its log, appending a run's messages to its log, and decoding what was read."""

from __future__ import annotations

import sqlite3
from typing import Any

from ._codec import decode_run, encode_run, is_layout2
from ._errors import CorruptRecordError
from ._records import RunRecord

__all__ = ["LOAD_RUN", "UPSERT_RUN", "decode_loaded", "save_appended"]

# A layout-2 record names its log by row id; its messages are the chunks of that log before its
# `length`, each chunk the messages one save appended, joined by newlines (compact JSON has none).
LOAD_RUN = """
WITH r AS (
    SELECT rec, resumed_by, status,
        CASE WHEN substr(rec, 1, 12) = '{"layout":2,' AND json_valid(rec)
            THEN json_extract(rec, '$.log') END AS log,
        CASE WHEN substr(rec, 1, 12) = '{"layout":2,' AND json_valid(rec)
            THEN json_extract(rec, '$.length') END AS length
    FROM runs WHERE run_id = ?
)
SELECT r.rec, r.resumed_by, r.status, l.name, c.pos, c.messages
FROM r
LEFT JOIN transcript_logs AS l ON l.id = r.log
LEFT JOIN transcripts AS c ON c.log = l.id AND c.pos < r.length
ORDER BY c.pos
"""

UPSERT_RUN = """
INSERT INTO runs (run_id, status, resumed_by, rec, keep_until) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, rec = excluded.rec,
    keep_until = excluded.keep_until, resumed_by = coalesce(runs.resumed_by, excluded.resumed_by)
"""

_UPSERT_LOG = """
INSERT INTO transcript_logs (name, keep_until) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET keep_until = max(keep_until, excluded.keep_until)
RETURNING id
"""

# The chunk holding position `base` (or the last one before it) and every chunk after it.
_LOG_TAIL = """
SELECT pos, messages FROM transcripts
WHERE log = ? AND pos >= coalesce(
    (SELECT max(pos) FROM transcripts WHERE log = ? AND pos <= ?), 0)
ORDER BY pos
"""


def save_appended(
    conn: sqlite3.Connection, run: RunRecord, messages: list[str], keep_until: float
) -> bool:
    """Append the run's new messages to its log and write its record; False (nothing written)
    when the log holds other messages where the run's own belong."""
    assert run.transcript_id is not None
    (log,) = conn.execute(_UPSERT_LOG, (run.transcript_id, keep_until)).fetchone()
    stored: list[str] = []
    start = length = 0
    for pos, chunk in conn.execute(_LOG_TAIL, (log, log, run.base)).fetchall():
        if not stored:
            start = pos
        stored += chunk.split("\n")
    length = start + len(stored)
    if length < run.base:
        return False
    have = min(length - run.base, len(messages))
    offset = run.base - start
    if stored[offset : offset + have] != messages[:have]:
        return False
    if have < len(messages):
        conn.execute(
            "INSERT INTO transcripts (log, pos, messages) VALUES (?, ?, ?)",
            (log, length, "\n".join(messages[have:])),
        )
    rec = encode_run(run, log=log, status=False).decode()
    conn.execute(UPSERT_RUN, (run.run_id, run.status, run.resumed_by, rec, keep_until))
    return True


def decode_loaded(run_id: str, rows: list[Any]) -> RunRecord | None:
    """The run of `LOAD_RUN`'s rows: the record and, for layout 2, its transcript."""
    if not rows:
        return None
    rec, resumed_by, status, name = rows[0][:4]
    key = f"runs/{run_id}"
    if not is_layout2(rec):
        return decode_run(rec, key=key, run_id=run_id, resumed_by=resumed_by)
    if name is None:
        raise CorruptRecordError(key, "run", "its transcript log is gone")
    return decode_run(
        rec,
        key=key,
        run_id=run_id,
        resumed_by=resumed_by,
        transcript=[row[5] for row in rows if row[5] is not None],
        status=status,
        log_name=name,
    )
