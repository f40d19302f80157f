"""Reminders and escalations on SQLite: the nudge columns of `interactions` (added to files that
predate them), the query of due nudges and the conditional updates that fire one."""

from __future__ import annotations

import sqlite3

from ._codec import check_now
from ._errors import UsageError
from ._nudges import NUDGE_KINDS, next_nudge
from ._records import InteractionClaim, Nudge, NudgeKind
from ._sqlite_ix import IX_COLUMNS, decode_ix
from ._sqlite_part import SQLitePart

__all__ = ["SQLiteNudges", "add_nudge_columns"]


_NUDGE_COLUMNS = ("remind_at", "escalate_at", "reminded_at", "escalated_at")
"""Columns of `interactions` added after the table first shipped: a file created before them
gets them on open (`ALTER TABLE ... ADD COLUMN`, NULL for the rows it holds: no nudges)."""

_NUDGE_INDEX = """
CREATE INDEX IF NOT EXISTS interactions_nudges
    ON interactions (remind_at, escalate_at) WHERE status = 'pending' AND remind_at IS NOT NULL
"""

_NUDGES = f"""
SELECT {IX_COLUMNS}, remind_at, escalate_at FROM interactions
WHERE status = 'pending' AND remind_at IS NOT NULL AND expires_at > ? AND (
    (reminded_at IS NULL AND remind_at <= ?)
    OR (reminded_at IS NOT NULL AND escalated_at IS NULL AND escalate_at <= ?)
)
ORDER BY CASE WHEN reminded_at IS NULL THEN remind_at ELSE escalate_at END, interaction_id
LIMIT ?
"""

_MARK_REMINDED = f"""
UPDATE interactions SET reminded_at = ?
WHERE interaction_id = ? AND status = 'pending' AND expires_at > ?
    AND reminded_at IS NULL AND remind_at <= ?
RETURNING {IX_COLUMNS}
"""

_MARK_ESCALATED = f"""
UPDATE interactions SET escalated_at = ?
WHERE interaction_id = ? AND status = 'pending' AND expires_at > ?
    AND reminded_at IS NOT NULL AND escalated_at IS NULL AND escalate_at <= ?
RETURNING {IX_COLUMNS}
"""


def add_nudge_columns(conn: sqlite3.Connection) -> None:
    have = {row[1] for row in conn.execute("PRAGMA table_info(interactions)")}
    for column in _NUDGE_COLUMNS:
        if column not in have:
            conn.execute(f"ALTER TABLE interactions ADD COLUMN {column} REAL")
    conn.execute(_NUDGE_INDEX)


class SQLiteNudges(SQLitePart):
    """The reminder and escalation half of `SQLiteStore`."""

    async def due_nudges(self, now: float, *, limit: int = 100) -> list[Nudge]:
        check_now(now)
        if limit <= 0:
            return []
        params = (now, now, now, limit)
        rows = await self._call(lambda conn: conn.execute(_NUDGES, params).fetchall())
        found = []
        for row in rows:
            *ix, remind_at, escalate_at = row
            nudge = next_nudge(decode_ix(tuple(ix)), remind_at, escalate_at, now)
            if nudge is not None:
                found.append(nudge)
        return found

    async def mark_nudged(
        self, interaction_id: str, kind: NudgeKind, *, now: float
    ) -> InteractionClaim:
        if kind not in NUDGE_KINDS:
            raise UsageError(f"{kind!r} is not a nudge (reminder or escalation)")
        check_now(now)
        update = _MARK_REMINDED if kind == "reminder" else _MARK_ESCALATED
        params = (now, interaction_id, now, now)
        return await self._claim_interaction(interaction_id, update, params)
