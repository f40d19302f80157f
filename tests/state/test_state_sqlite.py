"""SQLite specifics: pragmas, retention without TTLs, and the audit cap."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from state import AuditEntry, CorruptRecordError, SQLiteStore

from .conftest import make_interaction, make_run


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "handback.db"


@pytest.fixture
async def store(db: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(db) as opened:
        yield opened


def raw(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        with conn:
            return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_the_file_is_in_wal_mode(store: SQLiteStore, db: Path) -> None:
    assert raw(db, "PRAGMA journal_mode") == [("wal",)]


async def test_a_second_store_on_the_same_file_sees_the_first_ones_writes(
    store: SQLiteStore, db: Path
) -> None:
    async with SQLiteStore(db) as other:
        await store.save_run(make_run())
        assert (await other.claim_run("run-1", child_id="other")).won
        assert not (await store.claim_run("run-1", child_id="mine")).won


async def test_rows_past_their_retention_are_pruned_on_open(store: SQLiteStore, db: Path) -> None:
    await store.save_run(make_run("old"))
    await store.save_run(make_run("new"))
    await store.add_interactions([make_interaction("ix-old", run_id="old")])
    await store.set_thread_run("C1", "1.1", "old")
    await store.first_delivery("Ev-old")
    await store.aclose()
    past = time.time() - 1
    for table in ("runs", "interactions", "run_interactions", "threads", "deliveries"):
        raw(db, f"UPDATE {table} SET keep_until = ?", past)
    raw(db, "UPDATE runs SET keep_until = ? WHERE run_id = 'new'", time.time() + 60)

    async with SQLiteStore(db) as reopened:
        assert await reopened.load_run("old") is None
        assert await reopened.load_run("new") is not None
        assert await reopened.get_interaction("ix-old") is None
        assert await reopened.get_thread_run("C1", "1.1") is None
        assert await reopened.first_delivery("Ev-old")


async def test_the_expiry_sweep_prunes_once_an_hour(
    store: SQLiteStore, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.save_run(make_run("old"))
    raw(db, "UPDATE runs SET keep_until = ?", time.time() - 1)
    await store.due_interactions(time.time())
    assert await store.load_run("old") is not None  # pruned on open, not again yet

    monkeypatch.setattr(store, "_last_prune", time.time() - 3601)
    await store.due_interactions(time.time())
    assert await store.load_run("old") is None


async def test_an_event_past_its_retention_counts_as_new(store: SQLiteStore, db: Path) -> None:
    assert await store.first_delivery("Ev1")
    assert not await store.first_delivery("Ev1")
    raw(db, "UPDATE deliveries SET keep_until = ?", time.time() - 1)
    assert await store.first_delivery("Ev1")
    assert not await store.first_delivery("Ev1")


async def test_the_audit_log_is_capped(
    store: SQLiteStore, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("state._sqlite_tx.AUDIT_CAP", 3)
    for n in range(5):
        await store.audit(AuditEntry(at=float(n), action="refused"))
    assert raw(db, "SELECT count(*) FROM audit") == [(3,)]
    assert [entry.at for entry in await store.recent_audit()] == [4.0, 3.0, 2.0]


async def test_an_unknown_status_column_is_corrupt(store: SQLiteStore, db: Path) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    raw(db, "UPDATE interactions SET status = 'exploded'")
    with pytest.raises(CorruptRecordError, match="interactions/ix-1"):
        await store.get_interaction("ix-1")


async def test_a_database_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    from state import StoreError

    with pytest.raises(StoreError, match="no-such-dir"):
        SQLiteStore(tmp_path / "no-such-dir" / "x.db")


async def test_many_tasks_share_one_connection_safely(store: SQLiteStore) -> None:
    import asyncio

    await asyncio.gather(*(store.save_run(make_run(f"run-{n}")) for n in range(50)))
    claims = await asyncio.gather(
        *(store.claim_run(f"run-{n % 10}", child_id=f"c{n}") for n in range(50))
    )
    assert sum(claim.won for claim in claims) == 10


async def test_settled_runs_reads_only_unclaimed_paused_runs_through_indexes(
    store: SQLiteStore, db: Path
) -> None:
    from state._sqlite import _SETTLED

    plan = " ".join(str(row[3]) for row in raw(db, "EXPLAIN QUERY PLAN " + _SETTLED, "", 10))
    assert "USING INDEX runs_unclaimed" in plan
    assert plan.count("USING COVERING INDEX interactions_run") == 2
    assert "SCAN" not in plan


async def test_opening_waits_for_another_process_creating_the_same_new_file(db: Path) -> None:
    """A second bot opening a new file while the first writes its schema must not fail."""
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # a write lock on a file still in rollback mode
        writer.execute("CREATE TABLE another_process (x)")
        opening = asyncio.create_task(asyncio.to_thread(SQLiteStore, db))
        # SQLite refused the WAL switch at once here; the store now waits as for any lock.
        await asyncio.sleep(0.05)
        assert not opening.done()
        writer.execute("COMMIT")
    finally:
        writer.close()
    async with await opening as store:
        await store.save_run(make_run())
        assert await store.load_run("run-1") is not None
    assert raw(db, "PRAGMA journal_mode") == [("wal",)]
