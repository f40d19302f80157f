"""Standing grants on SQLite: a `grants` table, indexed by the place a grant covers and kept
until `GRANT_GRACE` past its expiry (`keep_until`, pruned with the other tables)."""

from __future__ import annotations

import sqlite3
import time
from functools import partial
from typing import Any

from ._codec import check_now, encode_audit
from ._grant import GRANT_OVERLAY, Grant, GrantClaim, check_grant, decode_grant, encode_grant
from ._keys import GRANT_GRACE, LONGEST_WAIT
from ._records import AuditEntry
from ._sqlite_part import SQLitePart
from ._sqlite_tx import append_audit, transaction

__all__ = ["GRANT_ACTIVE", "GRANT_SCHEMA", "SQLiteGrants"]


# `thread_ts` is '' for a channel grant, so one index serves both lookups of a call.
GRANT_SCHEMA = """
CREATE TABLE IF NOT EXISTS grants (
    grant_id TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    granted_by TEXT NOT NULL,
    expires_at REAL NOT NULL,
    rec TEXT NOT NULL,
    revoked_at REAL,
    revoked_by TEXT,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS grants_scope ON grants (tool, channel, thread_ts, expires_at);
CREATE INDEX IF NOT EXISTS grants_expires ON grants (expires_at);
CREATE INDEX IF NOT EXISTS grants_keep_until ON grants (keep_until);
"""

GRANT_ACTIVE = "SELECT 1 FROM grants WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?"
"""Whether a grant is active at a time; run inside the answer's transaction."""

_COLUMNS = ", ".join(("grant_id", "rec", *GRANT_OVERLAY))

_INSERT = """
INSERT INTO grants (grant_id, tool, channel, thread_ts, granted_by, expires_at, rec, keep_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (grant_id) DO NOTHING
"""

_COVERING = f"""
SELECT {_COLUMNS} FROM grants
WHERE tool = ? AND channel = ? AND thread_ts IN (?, '') AND expires_at > ? AND revoked_at IS NULL
ORDER BY expires_at DESC, grant_id
"""

_ACTIVE = f"""
SELECT {_COLUMNS} FROM grants
WHERE expires_at > ? AND revoked_at IS NULL AND (? IS NULL OR granted_by = ?)
ORDER BY expires_at, grant_id
LIMIT ?
"""

_REVOKE = f"""
UPDATE grants SET revoked_at = ?, revoked_by = ?
WHERE grant_id = ? AND revoked_at IS NULL AND expires_at > ?
RETURNING {_COLUMNS}
"""


def _decode(row: tuple[Any, ...]) -> Grant:
    grant_id = str(row[0])
    return decode_grant(
        row[1],
        key=f"grants/{grant_id}",
        grant_id=grant_id,
        overlay=dict(zip(GRANT_OVERLAY, row[2:], strict=True)),
    )


def _add(conn: sqlite3.Connection, params: tuple[Any, ...], audit: str, now: float) -> bool:
    if params[5] <= now:
        return False
    if conn.execute(_INSERT, params).rowcount != 1:
        return False
    append_audit(conn, audit)
    return True


def _revoke(
    conn: sqlite3.Connection, grant_id: str, by: str, now: float, audit: str
) -> tuple[bool, Any]:
    rows = conn.execute(_REVOKE, (now, by, grant_id, now)).fetchall()
    if rows:
        append_audit(conn, audit)
        return True, rows[0]
    row = conn.execute(f"SELECT {_COLUMNS} FROM grants WHERE grant_id = ?", (grant_id,)).fetchone()
    return False, row


class SQLiteGrants(SQLitePart):
    """The grant half of `SQLiteStore` (all but `answer_under_grant`, which is an answer)."""

    async def add_grant(self, grant: Grant, *, audit: AuditEntry) -> bool:
        check_grant(grant)
        wait = min(max(grant.expires_at - time.time(), 0.0), LONGEST_WAIT)
        params = (
            grant.grant_id,
            grant.tool,
            grant.channel,
            grant.thread_ts if grant.scope == "thread" else "",
            grant.granted_by,
            grant.expires_at,
            encode_grant(grant).decode(),
            time.time() + wait + GRANT_GRACE,
        )
        entry = encode_audit(audit).decode()
        return await self._call(
            lambda conn: transaction(conn, partial(_add, conn, params, entry, grant.created_at))
        )

    async def get_grant(self, grant_id: str) -> Grant | None:
        query = f"SELECT {_COLUMNS} FROM grants WHERE grant_id = ?"
        row = await self._call(lambda conn: conn.execute(query, (grant_id,)).fetchone())
        return None if row is None else _decode(row)

    async def covering_grants(
        self, tool: str, *, channel: str, thread_ts: str | None, now: float
    ) -> list[Grant]:
        check_now(now)
        # '' stands for the channel grants; a call outside any thread matches no thread grant.
        params = (tool, channel, thread_ts or "", now)
        rows = await self._call(lambda conn: conn.execute(_COVERING, params).fetchall())
        found = [_decode(row) for row in rows]
        return [g for g in found if g.covers(tool, channel=channel, thread_ts=thread_ts)]

    async def active_grants(
        self, *, now: float, granted_by: str | None = None, limit: int = 100
    ) -> list[Grant]:
        check_now(now)
        if limit <= 0:
            return []
        params = (now, granted_by, granted_by, limit)
        rows = await self._call(lambda conn: conn.execute(_ACTIVE, params).fetchall())
        return [_decode(row) for row in rows]

    async def revoke_grant(
        self, grant_id: str, *, by: str, now: float, audit: AuditEntry
    ) -> GrantClaim:
        check_now(now)
        entry = encode_audit(audit).decode()
        won, row = await self._call(
            lambda conn: transaction(conn, partial(_revoke, conn, grant_id, by, now, entry))
        )
        return GrantClaim(won=won, grant=None if row is None else _decode(row))
