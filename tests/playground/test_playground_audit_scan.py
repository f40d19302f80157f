"""The playground's store is one the suite scans for typed secrets (`TEST_SECRETS`, at the
`sqlite_store_url` fixture's teardown): a secret planted in its audit is found there."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bot.playground import Playground
from state import AuditEntry

from ..conftest import _sqlite_audit_leaks


async def test_a_secret_in_the_playgrounds_audit_is_seen_by_the_suites_scan(
    playground: Playground, sqlite_store_url: str
) -> None:
    assert playground.store_in_use == sqlite_store_url
    path = Path(sqlite_store_url.removeprefix("sqlite:///"))
    assert _sqlite_audit_leaks(path) == []
    planted = "ran /deploy token=hunter2-in-the-playground"
    await playground.bot.store.audit(AuditEntry(at=time.time(), action="refused", detail=planted))
    leaks = _sqlite_audit_leaks(path)
    assert len(leaks) == 1 and "hunter2-in-the-playground" in leaks[0]
    # Planted on purpose: removed, so that the fixture's own scan at teardown passes.
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM audit WHERE rec LIKE '%hunter2-in-the-playground%'")
    conn.close()
    assert _sqlite_audit_leaks(path) == []
