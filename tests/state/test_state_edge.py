"""Edge cases of both stores: odd ids, odd times, falsy answers, races, big records, broken
files and servers, cancellation and lifecycles."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import redis.asyncio as aioredis

from state import (
    Approval,
    AuditEntry,
    Grant,
    InteractionRecord,
    RedisStore,
    SQLiteStore,
    StopGuard,
    Store,
    StoreClosedError,
    StoreError,
    open_store,
)

# Kept out of `state.__all__` (only the Slack app's internals use it): pinned here directly.
from state._grant import grant_id_for
from state._keys import (
    AUDIT_CAP,
    INTERACTION_GRACE,
    LONGEST_WAIT,
    RUN_TTL,
    SETTLED_TTL,
    THREAD_TTL,
    RedisKeys,
)

# Coordination records, kept out of `state.__all__`: this test pins the store's side.
from state._records import ThreadLease, TurnClaim

from .conftest import make_interaction, make_run

ODD_IDS = [
    "a:b:c",
    "{tag}",
    "with spaces",
    "ünïcode-☃-𝄞",
    "x" * 200,
    "nul\x00inside",
    "(",
    "[",
    "-",
    "+",
    "*?",
    "%3A",
]


def answered(claim_record: InteractionRecord | None) -> InteractionRecord:
    assert claim_record is not None
    return claim_record


# Identifiers


@pytest.mark.parametrize("ident", ODD_IDS, ids=range(len(ODD_IDS)))
async def test_odd_ids_work_through_every_call(store: Store, ident: str) -> None:
    """Lua builds keys by concatenating ids; SQL binds them: any text must do in both."""
    now = time.time()
    await store.save_run(make_run(ident))
    await store.add_interactions(
        [
            make_interaction(ident, run_id=ident, channel=ident, thread_ts=ident),
            make_interaction(f"{ident}/late", run_id=ident, expires_at=now - 1),
        ]
    )
    await store.set_message(ident, channel=ident, message_ts=ident)
    record = await store.get_interaction(ident)
    assert record is not None and (record.channel, record.message_ts) == (ident, ident)
    assert [r.interaction_id for r in await store.run_interactions(ident)] == [
        ident,
        f"{ident}/late",
    ]
    assert [r.interaction_id for r in await store.due_interactions(now)] == [f"{ident}/late"]
    claim = await store.answer_interaction(ident, answer=ident, answered_by=ident, now=now)
    assert claim.won and answered(claim.record).answered_by == ident
    await store.close_interaction(f"{ident}/late", status="expired", now=now)
    assert await store.settled_runs() == [ident]
    run_claim = await store.claim_run(ident, child_id=ident)
    assert run_claim.won and run_claim.run is not None and run_claim.run.resumed_by == ident
    await store.set_thread_run(ident, ident, ident)
    assert await store.get_thread_run(ident, ident) == ident
    assert await store.first_delivery(ident)
    assert not await store.first_delivery(ident)
    await store.audit(AuditEntry(at=now, action="answered", interaction_id=ident, user=ident))
    assert (await store.recent_audit(limit=1))[0].interaction_id == ident


async def test_settled_runs_page_through_odd_ids_in_byte_order(store: Store) -> None:
    """Redis orders the index with memcmp and SQLite with BINARY: both are UTF-8 byte order,
    which is code point order, so `after` pages the same way on both."""
    now = time.time()
    for n, ident in enumerate(ODD_IDS):
        await store.save_run(make_run(ident))
        await store.add_interactions([make_interaction(f"ix-{n}", run_id=ident)])
        await store.answer_interaction(f"ix-{n}", answer=n, answered_by="U1", now=now)
    pages: list[str] = []
    after: str | None = None
    while page := await store.settled_runs(limit=1, after=after):
        pages += page
        after = page[-1]
    assert pages == sorted(ODD_IDS)
    assert await store.settled_runs(limit=100) == sorted(ODD_IDS)


@pytest.mark.parametrize(
    ("first", "second"),
    [(("a:b", "c"), ("a", "b:c")), (("a%3Ab", "c"), ("a:b", "c")), (("a", "b"), ("a:b", ""))],
)
async def test_threads_whose_parts_join_alike_stay_apart(
    store: Store, first: tuple[str, str], second: tuple[str, str]
) -> None:
    await store.set_thread_run(*first, "run-first")
    await store.set_thread_run(*second, "run-second")
    assert await store.get_thread_run(*first) == "run-first"
    assert await store.get_thread_run(*second) == "run-second"


# Times


async def test_an_expiry_far_in_the_future_is_kept_and_answerable(store: Store) -> None:
    """A TTL setting of `1e20` seconds: Redis refused the key's TTL before the cap."""
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1", expires_at=1e20)])
    record = await store.get_interaction("ix-1")
    assert record is not None and record.expires_at == 1e20
    assert await store.due_interactions(time.time() + 1e9) == []
    claim = await store.answer_interaction("ix-1", answer=1, answered_by="U1", now=time.time())
    assert claim.won


async def test_a_negative_expiry_is_already_due_and_unanswerable(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", expires_at=-5.0)])
    assert [r.interaction_id for r in await store.due_interactions(0.0)] == ["ix-1"]
    claim = await store.answer_interaction("ix-1", answer=1, answered_by="U1", now=time.time())
    assert not claim.won and answered(claim.record).status == "pending"


@pytest.mark.parametrize("field", ["expires_at", "created_at", "answered_at"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
async def test_a_time_json_cannot_hold_is_refused_before_any_write(
    store: Store, field: str, value: float
) -> None:
    """JSON would hold `null` and the record would read back corrupt (or never expire)."""
    good = make_interaction("ix-good")
    fields: dict[str, Any] = {field: value}
    bad = make_interaction("ix-bad", **fields)
    with pytest.raises(ValueError, match=f"`ix-bad`.*`{field}`"):
        await store.add_interactions([good, bad])
    assert await store.get_interaction("ix-good") is None
    assert await store.get_interaction("ix-bad") is None


async def test_a_nan_now_is_refused_by_every_call_that_compares_it(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", expires_at=1.0)])
    nan = float("nan")
    with pytest.raises(ValueError, match="`now`"):
        await store.due_interactions(nan)
    with pytest.raises(ValueError, match="`now`"):
        await store.answer_interaction("ix-1", answer=1, answered_by="U1", now=nan)
    with pytest.raises(ValueError, match="`now`"):
        await store.close_interaction("ix-1", status="expired", now=nan)
    assert answered(await store.get_interaction("ix-1")).status == "pending"


async def test_an_infinite_now_lists_every_pending_interaction(store: Store) -> None:
    now = time.time()
    await store.add_interactions(
        [
            make_interaction("soon", expires_at=now + 10),
            make_interaction("far", expires_at=1e20),
            make_interaction("gone", expires_at=now - 10),
        ]
    )
    await store.close_interaction("gone", status="expired", now=now)
    due = await store.due_interactions(float("inf"))
    assert [r.interaction_id for r in due] == ["soon", "far"]
    claim = await store.close_interaction("soon", status="expired", now=float("inf"))
    assert claim.won and answered(claim.record).answered_at == float("inf")


@pytest.mark.parametrize("limit", [0, -1, -100])
async def test_no_positive_limit_reads_nothing(store: Store, limit: int) -> None:
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1", expires_at=1.0)])
    await store.close_interaction("ix-1", status="expired", now=2.0)
    await store.add_interactions([make_interaction("ix-2", expires_at=1.0)])
    await store.audit(AuditEntry(at=1.0, action="expired"))
    assert await store.due_interactions(time.time(), limit=limit) == []
    assert await store.settled_runs(limit=limit) == []
    assert await store.recent_audit(limit=limit) == []


# Answers


@pytest.mark.parametrize("answer", [None, False, 0, "", [], {}])
async def test_a_falsy_answer_is_an_answer_for_good(store: Store, answer: Any) -> None:
    """Stored JSON `null` is not a missing answer: no re-add, second answer or sweep undoes it."""
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1")])
    assert (await store.answer_interaction("ix-1", answer=answer, answered_by="U1", now=1.0)).won
    await store.add_interactions([make_interaction("ix-1", payload={"question": "changed?"})])
    second = await store.answer_interaction("ix-1", answer="other", answered_by="U2", now=2.0)
    closed = await store.close_interaction("ix-1", status="superseded", now=3.0)
    assert not second.won and not closed.won
    for record in (
        answered(second.record),
        answered(closed.record),
        answered(await store.get_interaction("ix-1")),
    ):
        assert record.status == "answered" and record.answered_by == "U1"
        assert record.answer == answer and type(record.answer) is type(answer)
        assert record.payload == make_interaction().payload
    assert await store.due_interactions(float("inf")) == []
    assert await store.settled_runs() == ["run-1"]


# Big records


async def test_a_five_megabyte_run_and_interaction_round_trip(store: Store) -> None:
    big = "x" * (5 * 1024 * 1024)
    run = make_run(transcript=[{"role": "user", "content": big}], answers={"ix-1": big})
    await store.save_run(run)
    assert await store.load_run("run-1") == run
    claim = await store.claim_run("run-1", child_id="child")
    assert claim.won and claim.run is not None and claim.run.transcript == run.transcript
    await store.add_interactions([make_interaction("ix-1", payload={"text": big})])
    won = await store.answer_interaction("ix-1", answer=big, answered_by="U1", now=time.time())
    record = answered(won.record)
    assert won.won and record.answer == big and record.payload == {"text": big}


# Races


async def test_a_save_racing_a_claim_never_clears_the_claim(store: Store) -> None:
    """The runtime saves the parent again while a click claims it: the claim stays final."""
    for n in range(20):
        run_id = f"run-{n}"
        await store.save_run(make_run(run_id))
        save = store.save_run(make_run(run_id, answers={"ix": n}))
        claim = store.claim_run(run_id, child_id=f"child-{n}")
        if n % 2:
            _, won = await asyncio.gather(save, claim)
        else:
            won, _ = await asyncio.gather(claim, save)
        assert won.won
        stored = await store.load_run(run_id)
        assert stored is not None and stored.resumed_by == f"child-{n}"
        assert stored.answers == {"ix": n}
        assert not (await store.claim_run(run_id, child_id="late")).won


async def test_a_close_racing_an_answer_has_one_winner_and_its_outcome(store: Store) -> None:
    records = [make_interaction(f"ix-{n}") for n in range(20)]
    await store.add_interactions(records)
    now = time.time()
    for n in range(20):
        ix = f"ix-{n}"
        attempts: list[Awaitable[Any]] = [
            store.answer_interaction(ix, answer=n, answered_by="U1", now=now),
            store.close_interaction(ix, status="superseded", now=now),
        ]
        if n % 2:
            attempts.reverse()
        claims = await asyncio.gather(*attempts)
        assert sum(claim.won for claim in claims) == 1
        winner = next(claim for claim in claims if claim.won)
        stored = answered(await store.get_interaction(ix))
        assert stored.status == answered(winner.record).status
        assert stored.answer == (n if stored.status == "answered" else None)


async def test_a_re_add_racing_an_answer_never_resets_it(store: Store) -> None:
    await store.add_interactions([make_interaction(f"ix-{n}") for n in range(20)])
    now = time.time()
    for n in range(20):
        ix = f"ix-{n}"
        claim, _ = await asyncio.gather(
            store.answer_interaction(ix, answer=None, answered_by="U1", now=now),
            store.add_interactions([make_interaction(ix, run_id="child")]),
        )
        stored = answered(await store.get_interaction(ix))
        # Either order is valid; an answer that won is never undone by the re-add after it.
        assert claim.won
        assert (stored.status, stored.answered_by, stored.answer) == ("answered", "U1", None)


# Audit


async def test_the_audit_log_keeps_exactly_the_newest_cap_entries(store: Store) -> None:
    for n in range(AUDIT_CAP + 1):
        await store.audit(AuditEntry(at=float(n), action="answered"))
    everything = await store.recent_audit(limit=AUDIT_CAP * 2)
    assert len(everything) == AUDIT_CAP
    assert everything[0].at == float(AUDIT_CAP) and everything[-1].at == 1.0
    await store.audit(AuditEntry(at=-1.0, action="refused"))
    newest = await store.recent_audit(limit=2)
    assert [entry.at for entry in newest] == [-1.0, float(AUDIT_CAP)]
    assert len(await store.recent_audit(limit=AUDIT_CAP * 2)) == AUDIT_CAP


# SQLite


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
                (two if n % 2 else one).answer_interaction(
                    "ix-1", answer=n, answered_by=f"U{n}", now=time.time()
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
    from state._sqlite import _SETTLED

    path = tmp_path / "handback.db"
    async with SQLiteStore(path) as store:
        await store.save_run(make_run())
        await store.add_interactions([make_interaction()])
        await store.answer_interaction("ix-1", answer=1, answered_by="U1", now=time.time())
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
    from state._sqlite import _transaction

    conn = sqlite3.connect(":memory:", isolation_level=None)

    def fails_like_a_full_disk() -> None:
        conn.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")

    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        _transaction(conn, fails_like_a_full_disk)
    conn.close()


# Redis


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def redis_store(redis_store_url: str) -> AsyncIterator[RedisStore]:
    async with RedisStore.from_url(redis_store_url) as store:
        yield store


@pytest.fixture(params=["redis", "cluster"])
async def any_redis_store(request: pytest.FixtureRequest) -> AsyncIterator[RedisStore]:
    """A store on the single Redis, then on the Redis Cluster."""
    async with RedisStore.from_url(
        str(request.getfixturevalue(f"{request.param}_store_url"))
    ) as store:
        yield store


def _with_db(url: str, db: int, *, password: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if password is not None:
        netloc = f":{password}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}"))


async def test_a_url_with_a_password_and_a_db_number_uses_that_db(redis_url: str) -> None:
    prefix = f"hbtest-{uuid.uuid4().hex[:12]}:"
    # A server without `requirepass` accepts any password from the default user.
    url = _with_db(redis_url, 9, password="s3cr3t-pw") + f"?prefix={prefix}"
    db9 = redis.Redis.from_url(_with_db(redis_url, 9))
    try:
        async with open_store(url) as store:
            assert "s3cr3t-pw" not in repr(store)
            await store.save_run(make_run())
            assert db9.exists(f"{prefix}run:run-1") == 1
            assert await store.load_run("run-1") == make_run()
    finally:
        keys = list(db9.scan_iter(match=f"{prefix}*"))
        if keys:
            db9.delete(*keys)
        db9.close()


async def test_rediss_to_a_plain_server_fails_at_open_as_a_store_error(redis_url: str) -> None:
    """Query options other than `prefix` reach redis-py, so a connect timeout can be set."""
    parts = urlsplit(redis_url)
    url = urlunsplit(
        parts._replace(scheme="rediss", query="socket_connect_timeout=0.5&prefix=hbtest-tls:")
    )
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot reach Redis"):
        async with open_store(url):
            pass
    assert time.monotonic() - started < 4


class Proxy:
    """A TCP relay to the real Redis that can be cut, as when the server goes away."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        self.writers += [writer, upstream_writer]
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()


RedisCall = Callable[[RedisStore], Awaitable[object]]

REDIS_CALLS: dict[str, RedisCall] = {
    "save_run": lambda s: s.save_run(make_run()),
    "load_run": lambda s: s.load_run("run-1"),
    "claim_run": lambda s: s.claim_run("run-1", child_id="child"),
    "add_interactions": lambda s: s.add_interactions([make_interaction()]),
    "get_interaction": lambda s: s.get_interaction("ix-1"),
    "run_interactions": lambda s: s.run_interactions("run-1"),
    "set_message": lambda s: s.set_message("ix-1", channel="C1", message_ts="1.2"),
    "answer_interaction": lambda s: s.answer_interaction(
        "ix-1", answer=1, answered_by="U1", now=time.time()
    ),
    "answer_and_claim": lambda s: s.answer_and_claim(
        "ix-1",
        answer=1,
        answered_by="U1",
        now=time.time(),
        audit=AuditEntry(at=1.0, action="answered"),
    ),
    "close_interaction": lambda s: s.close_interaction("ix-1", status="expired", now=time.time()),
    "due_interactions": lambda s: s.due_interactions(time.time()),
    "due_nudges": lambda s: s.due_nudges(time.time()),
    "mark_nudged": lambda s: s.mark_nudged("ix-1", "reminder", now=time.time()),
    "withdraw_answer": lambda s: s.withdraw_answer(
        "ix-1", answered_by="U1", run_id="run-1", audit=AuditEntry(at=1.0, action="withdrawn")
    ),
    "withdraw_vote": lambda s: s.withdraw_vote(
        "ix-1", user="U1", audit=AuditEntry(at=1.0, action="withdrawn")
    ),
    "settled_runs": lambda s: s.settled_runs(),
    "set_thread_run": lambda s: s.set_thread_run("C1", "1.1", "run-1"),
    "get_thread_run": lambda s: s.get_thread_run("C1", "1.1"),
    "first_delivery": lambda s: s.first_delivery("Ev1"),
    "audit": lambda s: s.audit(AuditEntry(at=1.0, action="answered")),
    "recent_audit": lambda s: s.recent_audit(),
    "enqueue": lambda s: s.enqueue("event", {"n": 1}, dedupe="Ev1"),
    "take": lambda s: s.take("worker-a"),
    "blocking_take": lambda s: s.take("worker-a", block=1.0),
    "extend": lambda s: s.extend("worker-a", ["1-0"], lease=5),
    "done": lambda s: s.done("1-0"),
    "inbox_size": lambda s: s.inbox_size(),
}


@pytest.mark.parametrize("name", sorted(REDIS_CALLS))
async def test_a_redis_that_goes_away_mid_run_is_a_store_error(
    redis_url: str, redis_store_url: str, name: str
) -> None:
    parts = urlsplit(redis_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    port = await proxy.start()
    prefix = redis_store_url.split("prefix=", 1)[1]
    url = urlunsplit(parts._replace(netloc=f":pw-hidden@127.0.0.1:{port}", query=""))
    async with RedisStore.from_url(f"{url}?prefix={prefix}") as store:
        await store.save_run(make_run())
        await proxy.cut()
        with pytest.raises(StoreError, match="Redis at `redis://:\\*\\*\\*@") as caught:
            await REDIS_CALLS[name](store)
        assert isinstance(caught.value.__cause__, redis.RedisError)
        assert "pw-hidden" not in str(caught.value)


async def test_every_script_is_reloaded_when_the_server_forgot_it(
    any_redis_store: RedisStore,
) -> None:
    """A restarted server (or `SCRIPT FLUSH`) answers NOSCRIPT; redis-py loads the script again.
    An unknown digest gets exactly that answer without flushing the shared server."""
    scripts = [value for value in vars(any_redis_store).values() if hasattr(value, "sha")]
    assert len(scripts) == 33
    for script in scripts:
        script.sha = "0" * 40
    await any_redis_store.save_run(make_run())
    appended = make_run(
        "run-3", layout=2, transcript_id="run-3", transcript=[{"role": "user", "content": "hi"}]
    )
    await any_redis_store.save_run(appended)
    assert await any_redis_store.load_run("run-3") == appended
    await any_redis_store.save_run(make_run("run-2"))
    await any_redis_store.add_interactions(
        [make_interaction("ix-1"), make_interaction("ix-2", expires_at=1.0)]
    )
    await any_redis_store.add_interactions([make_interaction("ix-3", run_id="run-2")])
    await any_redis_store.set_message("ix-1", channel="C9", message_ts="9.9")
    assert len(await any_redis_store.run_interactions("run-1")) == 2
    assert [r.interaction_id for r in await any_redis_store.due_interactions(time.time())] == [
        "ix-2"
    ]
    assert (
        await any_redis_store.answer_interaction("ix-1", answer=1, answered_by="U", now=2.0)
    ).won
    assert (await any_redis_store.close_interaction("ix-2", status="expired", now=2.0)).won
    assert await any_redis_store.settled_runs() == ["run-1"]
    assert (await any_redis_store.claim_run("run-1", child_id="child")).won
    assert (await any_redis_store.claim_run("run-2", child_id="child")).won
    assert (await any_redis_store.close_interaction("ix-3", status="superseded", now=2.0)).won
    assert await any_redis_store.settled_runs() == []  # run-2, claimed, dropped from the index
    await any_redis_store.audit(AuditEntry(at=1.0, action="answered"))
    await any_redis_store.save_run(make_run("run-3"))
    await any_redis_store.add_interactions([make_interaction("ix-4", run_id="run-3")])
    answered = await any_redis_store.answer_and_claim(
        "ix-4",
        answer=1,
        answered_by="U",
        now=2.0,
        audit=AuditEntry(at=2.0, action="answered"),
        turn=TurnClaim(
            run_id="run-3",
            child_id="child",
            lease=ThreadLease(channel="C2", thread_ts="2.2", owner="a"),
            lease_ttl=60,
        ),
    )
    assert answered.won and answered.run is not None
    assert await any_redis_store.acquire_thread("C1", "1.1", owner="a", ttl=60)
    assert (await any_redis_store.take_thread("C1", "1.1", owner="a", ttl=60)).held
    await any_redis_store.release_thread("C1", "1.1", owner="a")
    item_id = await any_redis_store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert [item.item_id for item in await any_redis_store.take("worker-a")] == [item_id]
    assert await any_redis_store.extend("worker-a", [str(item_id)], lease=5) == [item_id]
    await any_redis_store.done(str(item_id))
    await any_redis_store.save_run(make_run("run-5"))
    rule = Approval(remind_after=1).to_json()
    nudged = make_interaction(
        "ix-5", run_id="run-5", kind="approval", payload={"tool": "t", "rule": rule}, created_at=1.0
    )
    await any_redis_store.add_interactions([nudged])
    assert [n.kind for n in await any_redis_store.due_nudges(time.time())] == ["reminder"]
    assert (await any_redis_store.mark_nudged("ix-5", "reminder", now=time.time())).won
    await any_redis_store.answer_interaction("ix-5", answer=True, answered_by="U", now=2.0)
    withdrawn = await any_redis_store.withdraw_answer(
        "ix-5", answered_by="U", run_id="run-5", audit=AuditEntry(at=3.0, action="withdrawn")
    )
    assert withdrawn.won
    await any_redis_store.mark_home_opened("U1", ttl=60)
    now = time.time()
    await any_redis_store.add_interactions([make_interaction("ix-6", run_id="run-5")])
    grant = Grant(
        grant_id=grant_id_for("ix-5"),
        tool="t",
        scope="thread",
        channel="C1",
        thread_ts="1.1",
        granted_by="U",
        created_at=now,
        expires_at=now + 60,
        interaction_id="ix-5",
        run_id="run-5",
        path="agent.t",
        requesters=("U0ALICE",),
    )
    assert await any_redis_store.add_grant(grant, audit=AuditEntry(at=now, action="granted"))
    assert await any_redis_store.covering_grants("t", channel="C1", thread_ts="1.1", now=now)
    assert await any_redis_store.active_grants(now=now)
    under = await any_redis_store.answer_under_grant(
        "ix-6",
        grant_id=grant.grant_id,
        answer=True,
        answered_by="U",
        now=now,
        audit=AuditEntry(at=now, action="answered"),
    )
    assert under.won
    revoked = await any_redis_store.revoke_grant(
        grant.grant_id, by="U", now=now, audit=AuditEntry(at=now, action="revoked")
    )
    assert revoked.won
    pair = {"tool": "t", "rule": Approval(count=2).to_json()}
    await any_redis_store.add_interactions(
        [make_interaction("ix-7", run_id="run-5", kind="approval", payload=pair)]
    )
    voted = await any_redis_store.answer_and_claim(
        "ix-7",
        answer={"approved": True},
        answered_by="U",
        now=now,
        audit=[AuditEntry(at=now, action="answered")] * 2,
        needed=2,
    )
    assert voted.partial
    unvoted = await any_redis_store.withdraw_vote(
        "ix-7", user="U", audit=AuditEntry(at=now, action="withdrawn")
    )
    assert unvoted.won and unvoted.record is not None and unvoted.record.votes == []
    # The journal's guarded saves (the started mark of a turn that may have been stopped).
    guard = StopGuard(run_id="run-6", channel="C9", thread_ts="6.0")
    assert await any_redis_store.save_run(make_run("run-6"), stop=guard)
    guarded = make_run(
        "run-7", layout=2, transcript_id="run-7", transcript=[{"role": "user", "content": "hi"}]
    )
    assert await any_redis_store.save_run(guarded, stop=replace(guard, run_id="run-7"))
    assert all(script.sha != "0" * 40 for script in scripts)


async def test_a_cancelled_redis_call_does_not_shift_later_replies(
    any_redis_store: RedisStore,
) -> None:
    """A reply left unread on a pooled connection would answer the next caller's command."""
    for n in range(3):
        await any_redis_store.save_run(make_run(f"run-{n}"))
    for attempt in range(40):
        task = asyncio.create_task(any_redis_store.load_run("run-0"))
        for _ in range(attempt % 4):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        loaded = await any_redis_store.load_run(f"run-{1 + attempt % 2}")
        assert loaded is not None and loaded.run_id == f"run-{1 + attempt % 2}"


def _near(ttl: int, expected: float) -> bool:
    return expected - 5 <= ttl <= expected


async def test_saves_and_writes_refresh_ttls_as_keys_documents(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    keys = RedisKeys(redis_store.prefix)
    await redis_store.save_run(make_run())
    await redis_store.add_interactions([make_interaction("ix-1")])
    await redis_store.set_thread_run("C1", "1.1", "run-1")
    for key in (keys.run("run-1"), keys.run_interactions("run-1"), keys.thread("C1", "1.1")):
        await raw.expire(key, 10)

    await redis_store.save_run(make_run())
    assert _near(await raw.ttl(keys.run("run-1")), RUN_TTL)
    await redis_store.add_interactions([make_interaction("ix-2")])
    assert _near(await raw.ttl(keys.run_interactions("run-1")), RUN_TTL)
    await redis_store.set_thread_run("C1", "1.1", "run-2")
    assert _near(await raw.ttl(keys.thread("C1", "1.1")), THREAD_TTL)

    await redis_store.answer_interaction("ix-1", answer=1, answered_by="U1", now=time.time())
    await raw.expire(keys.settled, 10)
    await redis_store.close_interaction("ix-2", status="expired", now=time.time())
    assert _near(await raw.ttl(keys.settled), SETTLED_TTL)
    # A claim is no save: it leaves the run's TTL as the last save set it.
    await raw.expire(keys.run("run-1"), 100)
    assert (await redis_store.claim_run("run-1", child_id="child")).won
    assert _near(await raw.ttl(keys.run("run-1")), 100)


async def test_a_far_future_expiry_keeps_the_interaction_for_the_longest_wait(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    await redis_store.add_interactions([make_interaction("ix-1", expires_at=1e20)])
    keys = RedisKeys(redis_store.prefix)
    assert _near(await raw.ttl(keys.interaction("ix-1")), LONGEST_WAIT + INTERACTION_GRACE)
    assert _near(await raw.ttl(keys.run_interactions("run-1")), LONGEST_WAIT + INTERACTION_GRACE)


async def test_a_repeat_delivery_does_not_extend_and_a_lapsed_one_is_new(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    key = RedisKeys(redis_store.prefix).delivery("Ev1")
    assert await redis_store.first_delivery("Ev1")
    await raw.expire(key, 100)
    assert not await redis_store.first_delivery("Ev1")
    assert _near(await raw.ttl(key), 100)
    await raw.pexpire(key, 1)
    async with asyncio.timeout(5):
        while await raw.exists(key):  # noqa: ASYNC110 - Redis signals no expiry here
            await asyncio.sleep(0.005)
    assert await redis_store.first_delivery("Ev1")
    assert not await redis_store.first_delivery("Ev1")


async def test_developer_mistakes_raise_the_one_usage_error(store: Store) -> None:
    """A store called in a way that can never work raises `UsageError` (drawn once, in `state`,
    and re-exported by `bot`): under `HandbackError`, and a `ValueError` and a `TypeError` both,
    so code written against either keeps catching it."""
    import bot
    from state import HandbackError, UsageError

    assert bot.UsageError is UsageError
    mistakes: list[Any] = [
        lambda: store.answer_interaction("ix", answer=1, answered_by="U", now=float("nan")),
        lambda: store.acquire_thread("C1", "1.1", owner="", ttl=1),
        lambda: store.acquire_thread("C1", "1.1", owner="a", ttl=0),
        lambda: store.enqueue("event", "not a dict"),  # type: ignore[arg-type]
        lambda: store.take("", count=1),
        lambda: store.close_interaction("ix", status="answered", now=1.0),
    ]
    for mistake in mistakes:
        with pytest.raises(UsageError) as caught:
            await mistake()
        assert isinstance(caught.value, HandbackError)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
