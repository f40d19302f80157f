"""SQLite specifics: pragmas, retention without TTLs, the audit cap, broken files and held
locks, and the lifecycle of the store across event loops, cancellation and closing."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from state import (
    AuditEntry,
    CorruptRecordError,
    SQLiteStore,
    StoreClosedError,
    StoreError,
    open_store,
)

from ..conftest import answer_only
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
    await store.enqueue("event", {"n": 1}, dedupe="Ev-old")
    await store.aclose()
    past = time.time() - 1
    for table in ("runs", "interactions", "run_interactions", "threads", "inbox_seen"):
        raw(db, f"UPDATE {table} SET keep_until = ?", past)
    raw(db, "UPDATE runs SET keep_until = ? WHERE run_id = 'new'", time.time() + 60)

    async with SQLiteStore(db) as reopened:
        assert await reopened.load_run("old") is None
        assert await reopened.load_run("new") is not None
        assert await reopened.get_interaction("ix-old") is None
        assert await reopened.get_thread_run("C1", "1.1") is None
        assert await reopened.enqueue("event", {"n": 2}, dedupe="Ev-old") is not None


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
    assert await store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None
    assert await store.enqueue("event", {"n": 2}, dedupe="Ev1") is None
    raw(db, "UPDATE inbox_seen SET keep_until = ?", time.time() - 1)
    assert await store.enqueue("event", {"n": 3}, dedupe="Ev1") is not None
    assert await store.enqueue("event", {"n": 4}, dedupe="Ev1") is None


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
    # The store's own query for settled runs, to ask SQLite how it would run it.
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


@pytest.mark.parametrize(
    "content",
    [b"hello, this is not a database\n", os.urandom(8192), b"SQLite format 3\x00" * 8],
    ids=["text", "random", "bad-header"],
)
async def test_a_file_that_is_not_sqlite_is_a_store_error_naming_it(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    with pytest.raises(StoreError, match=r"notes\.db") as caught:
        SQLiteStore(path)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert path.read_bytes() == content  # untouched
    with pytest.raises(StoreError, match=r"notes\.db"):
        async with open_store(f"sqlite:///{path}"):
            pass


async def test_an_sqlite_file_of_another_app_is_a_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "other-app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT)")
    conn.close()
    with pytest.raises(StoreError, match=r"other-app\.db.*keep_until"):
        SQLiteStore(path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through read-only permissions")
async def test_a_read_only_directory_is_a_store_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="locked"):
            SQLiteStore(locked / "handback.db")
    finally:
        locked.chmod(0o700)


async def test_a_lock_held_past_the_busy_timeout_is_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("state._sqlite.BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as store:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreError, match="locked") as caught:
                await store.add_interactions([make_interaction()])
            assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
            with pytest.raises(StoreError, match="locked"):
                await store.save_run(make_run())
            other.execute("ROLLBACK")
        finally:
            other.close()
        # Nothing was left half done: the store carries on.
        await store.add_interactions([make_interaction()])
        await store.save_run(make_run())
        assert (await store.claim_run("run-1", child_id="child")).won


async def test_a_started_mark_locked_out_past_the_busy_timeout_fails_as_a_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`save_run(then=...)`, the journal's started mark, on a file locked past the timeout:
    the store's error, and `then` is never called."""
    monkeypatch.setattr("state._sqlite.BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "h.db"
    called: list[str] = []
    async with SQLiteStore(path) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            run = make_run("run-1", status="running")
            with pytest.raises(StoreError, match="locked"):
                await store.save_run(run, then=lambda: called.append("then"))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert called == []


async def test_two_stores_in_one_process_share_claims_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as one, SQLiteStore(path) as two:
        await one.save_run(make_run())
        await two.add_interactions([make_interaction()])
        claims = await asyncio.gather(
            *((one if n % 2 else two).claim_run("run-1", child_id=f"c{n}") for n in range(20))
        )
        assert sum(claim.won for claim in claims) == 1
        answers = await asyncio.gather(
            *(
                answer_only(
                    two if n % 2 else one, "ix-1", answer=n, answered_by=f"U{n}", now=time.time()
                )
                for n in range(20)
            )
        )
        assert sum(claim.won for claim in answers) == 1


def test_one_sqlite_store_serves_two_event_loops_in_turn(tmp_path: Path) -> None:
    """The worker thread belongs to the store, not to a loop."""
    store = SQLiteStore(tmp_path / "handback.db")
    asyncio.run(store.save_run(make_run()))
    assert asyncio.run(store.load_run("run-1")) == make_run()
    assert asyncio.run(store.claim_run("run-1", child_id="child")).won
    asyncio.run(store.aclose())
    with pytest.raises(StoreClosedError):
        asyncio.run(store.load_run("run-1"))


async def test_aclose_lets_calls_in_flight_finish_first(tmp_path: Path) -> None:
    path = tmp_path / "handback.db"
    store = SQLiteStore(path)
    saves = [asyncio.create_task(store.save_run(make_run(f"run-{n}"))) for n in range(30)]
    await asyncio.sleep(0)  # every save has handed its work to the worker
    await store.aclose()
    await asyncio.gather(*saves)
    with pytest.raises(StoreClosedError):
        await store.save_run(make_run("late"))
    async with SQLiteStore(path) as reopened:
        for n in range(30):
            assert await reopened.load_run(f"run-{n}") is not None


async def test_cancelled_calls_neither_wedge_the_worker_nor_keep_a_transaction(
    tmp_path: Path,
) -> None:
    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as store:
        other = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            other.execute("BEGIN IMMEDIATE")  # the store's next write waits for this lock
            running = asyncio.create_task(store.add_interactions([make_interaction()]))
            await asyncio.sleep(0)  # the task hands its work to the worker's queue
            async with asyncio.timeout(5):  # until the worker took it: BEGIN IMMEDIATE waits
                while not store._executor._work_queue.empty():  # noqa: ASYNC110 - no event
                    await asyncio.sleep(0.001)
            queued = asyncio.create_task(store.save_run(make_run()))
            await asyncio.sleep(0)
            running.cancel()
            queued.cancel()
            for task in (running, queued):
                with pytest.raises(asyncio.CancelledError):
                    await task
            other.execute("COMMIT")
            # Work the worker had started completes; work still queued never runs.
            assert await store.get_interaction("ix-1") is not None
            assert await store.load_run("run-1") is None
            # The store holds no transaction: another connection can write at once.
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
        finally:
            other.close()
        await store.save_run(make_run())
        assert await store.load_run("run-1") is not None


def _names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def test_a_closed_store_leaves_no_wal_files(tmp_path: Path) -> None:
    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as store:
        await store.save_run(make_run())
        assert _names(tmp_path) == ["handback.db", "handback.db-shm", "handback.db-wal"]
    assert _names(tmp_path) == ["handback.db"]
    async with SQLiteStore(path) as reopened:
        assert await reopened.load_run("run-1") == make_run()


async def test_memory_stores_open_at_once_are_separate() -> None:
    async with open_store("sqlite:///:memory:") as one, open_store("sqlite://") as two:
        await one.save_run(make_run())
        assert await two.load_run("run-1") is None
        assert await one.load_run("run-1") == make_run()


async def test_an_older_file_without_the_settled_indexes_gets_them(tmp_path: Path) -> None:
    # The store's own query for settled runs, to ask SQLite how it runs it on the old file.
    from state._sqlite import _SETTLED

    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as store:
        await store.save_run(make_run())
        await store.add_interactions([make_interaction()])
        await answer_only(store, "ix-1", answer=1, answered_by="U1", now=time.time())
    with sqlite3.connect(path) as conn:  # the schema before `settled_runs` existed
        conn.execute("DROP INDEX runs_unclaimed")
        conn.execute("DROP INDEX interactions_run")
    conn.close()
    async with SQLiteStore(path) as store:
        assert await store.settled_runs() == ["run-1"]
    with sqlite3.connect(path) as conn:
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        plan = " ".join(
            str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + _SETTLED, ("", 1))
        )
    conn.close()
    assert {"runs_unclaimed", "interactions_run"} <= names
    assert "USING INDEX runs_unclaimed" in plan


def test_a_failed_commit_leaves_no_transaction_open() -> None:
    """A COMMIT that fails keeps the transaction; the next `BEGIN` would fail for good."""
    # The store's transaction helper, driven into SQLite's failure modes directly.
    from state._sqlite import _transaction

    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute(
        "CREATE TABLE child (parent_id INTEGER"
        " REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
    )
    with pytest.raises(sqlite3.IntegrityError):  # checked at COMMIT, not at INSERT
        _transaction(conn, lambda: conn.execute("INSERT INTO child VALUES (1)"))
    assert not conn.in_transaction
    _transaction(conn, lambda: conn.execute("INSERT INTO parent VALUES (1)"))
    assert conn.execute("SELECT count(*) FROM child").fetchone() == (0,)
    conn.close()


def test_an_error_after_sqlite_rolled_back_by_itself_is_not_hidden() -> None:
    """After a full disk or an I/O error SQLite has already rolled back; a second ROLLBACK
    raised "no transaction is active" in place of the error that mattered."""
    # The store's transaction helper, driven into SQLite's failure modes directly.
    from state._sqlite import _transaction

    conn = sqlite3.connect(":memory:", isolation_level=None)

    def fails_like_a_full_disk() -> None:
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        _transaction(conn, fails_like_a_full_disk)
    conn.close()
