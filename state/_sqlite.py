"""The SQLite store: stdlib `sqlite3` in WAL mode, one connection driven from one worker thread.

Every store call is one function run on the store's single worker thread, so calls from many
tasks never interleave inside a transaction and the event loop never waits on the disk or on
another process's write lock. Claims are single conditional `UPDATE`s (or `BEGIN IMMEDIATE`
transactions), which SQLite serialises across processes sharing the file as well.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from ._beat import Heartbeat, Lost
from ._codec import (
    INTERACTION_OVERLAY,
    check_interaction_times,
    check_now,
    decode_audit,
    decode_run,
    encode_audit,
    encode_interaction,
    encode_run,
    encode_stop,
    inline,
    lease_millis,
    own_messages,
)
from ._errors import CorruptRecordError, StoreClosedError, StoreError, StoreURLError, UsageError
from ._keys import (
    HOME_VIEWER_CAP,
    PRUNE_EVERY,
    RUN_TTL,
    STOP_TTL,
    STREAM_TTL,
    THREAD_TTL,
    interaction_ttl,
)
from ._nudges import nudge_times, unfired
from ._records import (
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    RunClaim,
    RunRecord,
    StopGuard,
    ThreadStop,
    ThreadTake,
)
from ._sqlite_answers import ACQUIRE_THREAD as _ACQUIRE_THREAD
from ._sqlite_answers import SELECT_STOP as _SELECT_STOP
from ._sqlite_answers import SQLiteAnswers, decode_stop_row, stop_row
from ._sqlite_beat import SQLiteHeartbeat
from ._sqlite_grants import GRANT_SCHEMA, SQLiteGrants
from ._sqlite_inbox import INBOX_SCHEMA, SET_THREAD_RUN, SQLiteInbox
from ._sqlite_ix import IX_COLUMNS as _IX_COLUMNS
from ._sqlite_ix import SELECT_IX as _SELECT_IX
from ._sqlite_ix import decode_ix as _decode_ix
from ._sqlite_log import LOAD_RUN as _LOAD_RUN
from ._sqlite_log import UPSERT_RUN as _UPSERT_RUN
from ._sqlite_log import decode_loaded as _decode_loaded
from ._sqlite_log import save_appended as _save_appended
from ._sqlite_mark import LoopWriter
from ._sqlite_nudges import SQLiteNudges
from ._sqlite_nudges import add_nudge_columns as _add_nudge_columns
from ._sqlite_resume import SQLiteResumes
from ._sqlite_tx import append_audit as _append_audit
from ._sqlite_tx import transaction as _transaction
from ._url import Synchronous, sqlite_options

__all__ = ["SQLiteStore"]

_SET_INITIATOR = """
INSERT INTO thread_initiators (channel, thread_ts, user, keep_until) VALUES (?, ?, ?, ?)
ON CONFLICT (channel, thread_ts) DO UPDATE SET
user = excluded.user, keep_until = excluded.keep_until
"""

_T = TypeVar("_T")

BUSY_TIMEOUT_MS = 5000
"""How long a write waits for another process's write lock before failing."""

# Files made before the inbox took over de-duplication (`inbox_seen`) keep an unused
# `deliveries` table: it is left alone, since an older process on the same file still prunes it.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    resumed_by TEXT,
    rec TEXT NOT NULL,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_keep_until ON runs (keep_until);
CREATE INDEX IF NOT EXISTS runs_unclaimed
    ON runs (run_id) WHERE status = 'paused' AND resumed_by IS NULL;

CREATE TABLE IF NOT EXISTS transcript_logs (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS transcript_logs_keep_until ON transcript_logs (keep_until);

CREATE TABLE IF NOT EXISTS transcripts (
    log INTEGER NOT NULL,
    pos INTEGER NOT NULL,
    messages TEXT NOT NULL,
    PRIMARY KEY (log, pos)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS interactions (
    interaction_id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    rec TEXT NOT NULL,
    status TEXT NOT NULL,
    expires_at REAL NOT NULL,
    answer TEXT,
    answered_by TEXT,
    answered_at REAL,
    channel TEXT,
    message_ts TEXT,
    keep_until REAL NOT NULL,
    votes TEXT,
    remind_at REAL,
    escalate_at REAL,
    reminded_at REAL,
    escalated_at REAL
);
CREATE INDEX IF NOT EXISTS interactions_due
    ON interactions (expires_at, interaction_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS interactions_keep_until ON interactions (keep_until);
CREATE INDEX IF NOT EXISTS interactions_run ON interactions (run_id, status);

CREATE TABLE IF NOT EXISTS run_interactions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    interaction_id TEXT NOT NULL,
    keep_until REAL NOT NULL,
    UNIQUE (run_id, interaction_id)
);
CREATE INDEX IF NOT EXISTS run_interactions_keep_until ON run_interactions (keep_until);

CREATE TABLE IF NOT EXISTS threads (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    run_id TEXT NOT NULL,
    keep_until REAL NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);
CREATE INDEX IF NOT EXISTS threads_keep_until ON threads (keep_until);

CREATE TABLE IF NOT EXISTS thread_leases (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    owner TEXT NOT NULL,
    keep_until REAL NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);
CREATE INDEX IF NOT EXISTS thread_leases_keep_until ON thread_leases (keep_until);

CREATE TABLE IF NOT EXISTS thread_stops (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    rec TEXT NOT NULL,
    keep_until REAL NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);
CREATE INDEX IF NOT EXISTS thread_stops_keep_until ON thread_stops (keep_until);

CREATE TABLE IF NOT EXISTS thread_initiators (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    user TEXT NOT NULL,
    keep_until REAL NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);
CREATE INDEX IF NOT EXISTS thread_initiators_keep_until ON thread_initiators (keep_until);

CREATE TABLE IF NOT EXISTS run_streams (
    run_id TEXT PRIMARY KEY,
    ts TEXT NOT NULL,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS run_streams_keep_until ON run_streams (keep_until);

CREATE TABLE IF NOT EXISTS home_viewers (
    user TEXT PRIMARY KEY,
    keep_until REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS home_viewers_keep_until ON home_viewers (keep_until);

CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rec TEXT NOT NULL
);
"""

_PRUNED = (
    "runs",
    "transcript_logs",
    "interactions",
    "run_interactions",
    "threads",
    "thread_leases",
    "thread_stops",
    "thread_initiators",
    "run_streams",
    "home_viewers",
    "inbox_seen",
    "grants",
)

_CLAIMED_RUN = """
SELECT r.rec, r.resumed_by, r.status, l.name FROM runs AS r
LEFT JOIN transcript_logs AS l ON l.id = CASE
    WHEN substr(r.rec, 1, 12) = '{"layout":2,' AND json_valid(r.rec)
    THEN json_extract(r.rec, '$.log') END
WHERE r.run_id = ?
"""

# A pending record added again keeps `reminded_at` and `escalated_at`: a request's nudges fire
# once, however often its run pauses on it.
_UPSERT_IX = """
INSERT INTO interactions (
    interaction_id, run_id, rec, status, expires_at, keep_until, remind_at, escalate_at
)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (interaction_id) DO UPDATE SET
    run_id = excluded.run_id, rec = excluded.rec, status = excluded.status,
    expires_at = excluded.expires_at, keep_until = excluded.keep_until,
    remind_at = excluded.remind_at, escalate_at = excluded.escalate_at,
    answer = NULL, answered_by = NULL, answered_at = NULL, channel = NULL, message_ts = NULL,
    votes = NULL
WHERE interactions.status = 'pending'
"""

_INDEX_IX = """
INSERT INTO run_interactions (run_id, interaction_id, keep_until) VALUES (?, ?, ?)
ON CONFLICT (run_id, interaction_id) DO UPDATE SET keep_until = excluded.keep_until
"""

_RUN_IX = f"""
SELECT {", ".join(f"i.{name}" for name in ("interaction_id", "rec", *INTERACTION_OVERLAY))}
FROM run_interactions AS r JOIN interactions AS i ON i.interaction_id = r.interaction_id
WHERE r.run_id = ? AND i.run_id = ?
ORDER BY r.seq
"""

_DUE = f"""
SELECT {_IX_COLUMNS} FROM interactions
WHERE status = 'pending' AND expires_at <= ?
ORDER BY expires_at, interaction_id
LIMIT ?
"""

_PENDING = f"""
SELECT {_IX_COLUMNS} FROM interactions
WHERE status = 'pending'
ORDER BY expires_at, interaction_id
LIMIT ?
"""

# The newest `cap` marks stay; a mark is refreshed in place, so the table holds a row per person.
_HOME_OPENED = """
INSERT INTO home_viewers (user, keep_until) VALUES (?, ?)
ON CONFLICT (user) DO UPDATE SET keep_until = excluded.keep_until
"""
_HOME_TRIM = """
DELETE FROM home_viewers WHERE keep_until <= ? OR user NOT IN
    (SELECT user FROM home_viewers ORDER BY keep_until DESC LIMIT ?)
"""

# Paused, unclaimed runs are few (those waiting for people), and the partial index lists exactly
# them in id order; each is then checked through the (run_id, status) index of interactions.
_SETTLED = """
SELECT r.run_id FROM runs AS r
WHERE r.status = 'paused' AND r.resumed_by IS NULL AND r.run_id > ?
  AND EXISTS (SELECT 1 FROM interactions AS i WHERE i.run_id = r.run_id AND i.status != 'pending')
  AND NOT EXISTS (
    SELECT 1 FROM interactions AS i WHERE i.run_id = r.run_id AND i.status = 'pending'
  )
ORDER BY r.run_id
LIMIT ?
"""


_ADDED_COLUMNS = (("interactions", "votes", "TEXT"), ("inbox", "about", "TEXT"))
"""Columns added since a table was first created: a file written before gets them on open."""


def _carried(record: InteractionRecord, row: tuple[Any, ...]) -> InteractionRecord:
    """`record` as it replaces the pending one `row` holds (a run paused again on it): with that
    one's card (`message_ts`), `created_at` and `expires_at`, so its card stays and its deadline
    and nudges do not move. A stored record that does not read is replaced as given."""
    try:
        stored = _decode_ix(row)
    except CorruptRecordError:
        return record
    return dataclasses.replace(
        record,
        message_ts=stored.message_ts,
        created_at=stored.created_at,
        expires_at=stored.expires_at,
    )


def _add_columns(conn: sqlite3.Connection) -> None:
    for table, column, kind in _ADDED_COLUMNS:
        have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")


def _in_memory(path: str) -> bool:
    return path in ("", ":memory:") or path.startswith("file::memory:")


def _then(then: Callable[[], None] | None) -> bool:
    """True, once `then` (if any) has been called: an in-memory database, which dies with the
    process, needs no mark written on the loop's thread (`LoopWriter`)."""
    if then is not None:
        then()
    return True


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL mode, waiting as long as any write would for a busy file.

    SQLite refuses the switch at once, without the busy timeout, while another connection writes
    to a file still in rollback mode: exactly what two processes opening a new file together do.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(0.01)


class SQLiteStore(SQLiteAnswers, SQLiteNudges, SQLiteInbox, SQLiteGrants, SQLiteResumes):
    """`Store` on an SQLite file (or `:memory:`); the schema is created on open.

    `SQLiteStore(path)` opens it now; `SQLiteStore.from_url("sqlite:///handback.db")` reads an
    SQLAlchemy-style URL. Use it as an async context manager or call `aclose()`.
    """

    def __init__(self, path: str | Path, *, synchronous: Synchronous = "normal") -> None:
        if synchronous not in ("normal", "full"):
            raise StoreURLError(f"`synchronous` must be 'normal' or 'full', not {synchronous!r}")
        self._path = str(path)
        self._synchronous: Synchronous = synchronous
        self._closed = False
        self._last_prune = 0.0
        self._init_inbox()
        try:
            self._conn = sqlite3.connect(
                self._path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self._path!r}: {exc}") from exc
        try:
            self._setup()
        except sqlite3.Error as exc:
            # Found on the first read: a file that is not SQLite, a read-only one, a full disk.
            self._conn.close()
            raise StoreError(f"cannot open SQLite database {self._path!r}: {exc}") from exc
        except BaseException:
            self._conn.close()
            raise
        # One worker: statements stay ordered, and the connection is never used by two threads.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="handback-sqlite")
        self._marks: LoopWriter | None = None
        """Writes whose caller acts right after the commit (`save_run(then=...)`); None for an
        in-memory database, which no second connection sees."""
        if not _in_memory(self._path):
            self._marks = LoopWriter(
                self._path, synchronous=synchronous, busy_timeout=BUSY_TIMEOUT_MS / 1000
            )
        self._calls = 0
        """Calls in `_call` right now: running on the worker thread, or waiting for it."""

    @classmethod
    def from_url(cls, url: str) -> Self:
        options = sqlite_options(url)
        return cls(options.path, synchronous=options.synchronous)

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    def _setup(self) -> None:
        conn = self._conn
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(conn)
        # In WAL mode NORMAL loses at most the last commits on power loss, never consistency;
        # FULL (`?synchronous=full`) fsyncs each commit for those who cannot lose even those.
        conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
        schema = (_SCHEMA + INBOX_SCHEMA + GRANT_SCHEMA).split(";")
        _transaction(conn, lambda: [conn.execute(s) for s in schema if s.strip()])
        _transaction(conn, partial(_add_columns, conn))
        _transaction(conn, lambda: _add_nudge_columns(conn))
        self._prune(time.time())

    def _prune(self, now: float) -> None:
        """Delete rows past their retention (the TTLs of `_keys`), as Redis would expire them."""
        self._last_prune = now
        conn = self._conn
        _transaction(
            conn,
            lambda: [
                conn.execute(
                    "DELETE FROM transcripts WHERE log IN"
                    " (SELECT id FROM transcript_logs WHERE keep_until < ?)",
                    (now,),
                ),
                *(
                    conn.execute(f"DELETE FROM {table} WHERE keep_until < ?", (now,))
                    for table in _PRUNED
                ),
            ],
        )

    async def __aenter__(self) -> Self:
        self._live()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        try:
            if self._marks is not None:
                self._marks.close()
            await loop.run_in_executor(self._executor, self._conn.close)
        finally:
            self._executor.shutdown(wait=False)

    def _live(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosedError(f"{self!r} is closed")
        return self._conn

    def open_heartbeat(self) -> Heartbeat:
        """A connection of its own to the file; an in-memory database, which only this
        connection sees, beats on the store's database thread (still no event loop)."""
        self._live()
        if _in_memory(self._path):
            conn, executor = self._conn, self._executor

            def run(work: Callable[[sqlite3.Connection], Lost]) -> Lost:
                return executor.submit(work, conn).result()

            return SQLiteHeartbeat(run, lambda: None, self._path)
        return SQLiteHeartbeat.on_file(self._path, busy_timeout=BUSY_TIMEOUT_MS / 1000)

    @property
    def calls_waiting(self) -> int:
        """Calls queued behind the one the database thread runs, and inbox writes until
        their group commit ends: a burst's acks wait for those."""
        return max(0, self._calls - 1) + self._enqueues.waiting

    async def _call(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run `work` on the worker thread; an SQLite failure (a lock held past the busy
        timeout, a full disk) is a `StoreError`.

        A caller cancelled while `work` waits its turn cancels it; once it runs it completes
        (commits or rolls back) on the worker, so the connection is never left mid-transaction.
        """
        conn = self._live()
        loop = asyncio.get_running_loop()
        self._calls += 1
        try:
            return await loop.run_in_executor(self._executor, partial(work, conn))
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite database {self._path!r} failed: {exc}") from exc
        finally:
            self._calls -= 1

    # Runs

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        """Insert or replace the run; a `resumed_by` already stored is kept (claims are final).

        Layout 2 appends the run's new messages to its transcript log in the same transaction.
        When the log holds other messages where this run's belong, the run is saved as layout 1
        (its transcript inline) instead, and `run` says so from then on. With `stop` the stop
        check comes first in the same transaction. With `then`, on a file, the transaction is
        made on the event loop's thread and `then()` called right after its commit
        (`LoopWriter`): nothing of this process, not even a turn of the loop, comes between.
        """
        # Whole seconds: a retention needs no more, and the row is smaller.
        keep_until = int(time.time()) + RUN_TTL

        def stopped(conn: sqlite3.Connection) -> bool:
            if stop is None:
                return False
            kept = conn.execute(
                _SELECT_STOP, (stop.channel, stop.thread_ts, time.time())
            ).fetchone()
            return kept is not None and kept[0] != run.stop_seen

        messages: list[str] = []
        if run.layout == 2:
            messages = [m.decode() for m in own_messages(run)]
            encode_run(run)  # refuses a run it cannot store before anything is written

        if then is not None and self._marks is not None:

            def whole(conn: sqlite3.Connection) -> bool:
                # One transaction where the threaded path takes two: on the loop's thread the
                # second would be one more stretch for which the loop waits.
                if stopped(conn):
                    return False
                if run.layout == 2:
                    if _save_appended(conn, run, messages, keep_until):
                        return True
                    inline(run)
                encoded = encode_run(run).decode()
                conn.execute(
                    _UPSERT_RUN, (run.run_id, run.status, run.resumed_by, encoded, keep_until)
                )
                return True

            def after(saved: bool) -> None:
                if saved:
                    then()

            self._live()
            try:
                return await self._marks.write(whole, after)
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite database {self._path!r} failed: {exc}") from exc

        if run.layout == 2:

            def appended(conn: sqlite3.Connection) -> bool | None:
                if stopped(conn):
                    return None
                return _save_appended(conn, run, messages, keep_until)

            saved = await self._call(lambda conn: _transaction(conn, partial(appended, conn)))
            if saved is None:
                return False
            if saved:
                return _then(then)
            inline(run)
        params = (run.run_id, run.status, run.resumed_by, encode_run(run).decode(), keep_until)

        def upsert(conn: sqlite3.Connection) -> bool:
            if stopped(conn):
                return False
            conn.execute(_UPSERT_RUN, params)
            return True

        if stop is None:
            await self._call(lambda conn: conn.execute(_UPSERT_RUN, params))
            return _then(then)
        if await self._call(lambda conn: _transaction(conn, partial(upsert, conn))):
            return _then(then)
        return False

    async def load_run(self, run_id: str) -> RunRecord | None:
        """One query: the record and, for layout 2, its transcript from the log."""
        rows = await self._call(lambda conn: conn.execute(_LOAD_RUN, (run_id,)).fetchall())
        return _decode_loaded(run_id, rows)

    async def claim_run(
        self, run_id: str, *, child_id: str, stop: StopGuard | None = None, read: bool = False
    ) -> RunClaim:
        if not child_id:
            raise UsageError("`child_id` must be a non-empty run id")
        if stop is not None and stop.run_id != run_id:
            raise UsageError("a claim's stop guard must name the run claimed")
        if read:
            if stop is not None:
                raise UsageError("a claim with `read` checks the run's own stop: give no `stop`")
            return await self._claim_read(run_id, child_id)

        def claim(conn: sqlite3.Connection) -> tuple[bool, Any, Any]:
            # An unclaimed run whose turn was stopped since it began is not claimed; one this
            # child holds already is (what it may still run is the journal's to refuse).
            mark = stop_row(conn, stop, time.time())
            if mark is not None:
                unclaimed = conn.execute(
                    "SELECT 1 FROM runs WHERE run_id = ? AND resumed_by IS NULL", (run_id,)
                ).fetchone()
                if unclaimed is not None:
                    return False, conn.execute(_CLAIMED_RUN, (run_id,)).fetchone(), mark
            # Won again by the child that holds it: a retried work item resumes with the same
            # derived child id and must carry on with what it started.
            won = conn.execute(
                "UPDATE runs SET resumed_by = ?"
                " WHERE run_id = ? AND status = 'paused'"
                " AND (resumed_by IS NULL OR resumed_by = ?)",
                (child_id, run_id, child_id),
            ).rowcount
            return won == 1, conn.execute(_CLAIMED_RUN, (run_id,)).fetchone(), None

        if stop is None:
            won, row, mark = await self._call(claim)
        else:
            # Read and write under one write lock, so no stop lands between them.
            won, row, mark = await self._call(lambda conn: _transaction(conn, partial(claim, conn)))
        if row is None:
            return RunClaim(won=False, run=None)
        stopped = None if stop is None else decode_stop_row(mark, stop.channel, stop.thread_ts)
        run = decode_run(
            row[0],
            key=f"runs/{run_id}",
            run_id=run_id,
            resumed_by=row[1],
            status=row[2],
            log_name=row[3],
        )
        return RunClaim(won=won, run=run, stopped=stopped)

    # Interactions

    async def add_interactions(self, records: list[InteractionRecord]) -> list[InteractionRecord]:
        """Insert records; an id already stored is replaced only while it is still pending, and
        then keeps its card, deadline and nudges (`_carried`). Returns each as stored, read in
        the transaction that adds it."""
        if not records:
            return []
        added = []
        for record in records:
            check_interaction_times(record)
            added.append(unfired(record))
        now = time.time()

        def add(conn: sqlite3.Connection) -> list[InteractionRecord | tuple[Any, ...]]:
            stored: list[InteractionRecord | tuple[Any, ...]] = []
            for record in added:
                row = conn.execute(_SELECT_IX, (record.interaction_id,)).fetchone()
                if row is not None and row[2] == "pending":
                    record = _carried(record, row)
                keep_until = now + interaction_ttl(record.expires_at, now)
                upsert = (
                    record.interaction_id,
                    record.run_id,
                    encode_interaction(record).decode(),
                    record.status,
                    record.expires_at,
                    keep_until,
                    *nudge_times(record),
                )
                if conn.execute(_UPSERT_IX, upsert).rowcount:
                    conn.execute(
                        _INDEX_IX,
                        (record.run_id, record.interaction_id, max(keep_until, now + RUN_TTL)),
                    )
                if row is None:
                    stored.append(record)
                else:
                    # Decoded after the commit: a kept record that does not read must not undo
                    # the others' adds.
                    stored.append(conn.execute(_SELECT_IX, (record.interaction_id,)).fetchone())
            return stored

        stored = await self._call(lambda conn: _transaction(conn, partial(add, conn)))
        return [
            value if isinstance(value, InteractionRecord) else _decode_ix(value) for value in stored
        ]

    async def get_interaction(self, interaction_id: str) -> InteractionRecord | None:
        row = await self._call(lambda conn: conn.execute(_SELECT_IX, (interaction_id,)).fetchone())
        return None if row is None else _decode_ix(row)

    async def run_interactions(self, run_id: str) -> list[InteractionRecord]:
        """The run's interactions in the order added; ids since re-added by a later run are not."""
        rows = await self._call(lambda conn: conn.execute(_RUN_IX, (run_id, run_id)).fetchall())
        return [_decode_ix(row) for row in rows]

    async def set_message(self, interaction_id: str, *, channel: str, message_ts: str) -> None:
        """Record where the card was posted; nothing happens when the interaction is gone."""
        await self._call(
            lambda conn: conn.execute(
                "UPDATE interactions SET channel = ?, message_ts = ? WHERE interaction_id = ?",
                (channel, message_ts, interaction_id),
            )
        )

    async def _claim_interaction(
        self, interaction_id: str, update: str, params: tuple[Any, ...]
    ) -> InteractionClaim:
        def claim(conn: sqlite3.Connection) -> tuple[bool, Any]:
            rows = conn.execute(update, params).fetchall()
            if rows:
                return True, rows[0]
            return False, conn.execute(_SELECT_IX, (interaction_id,)).fetchone()

        won, row = await self._call(claim)
        return InteractionClaim(won=won, record=None if row is None else _decode_ix(row))

    async def due_interactions(self, now: float, *, limit: int = 100) -> list[InteractionRecord]:
        """Oldest first; this periodic call also prunes expired rows, at most once an hour."""
        check_now(now)
        if limit <= 0:
            return []
        prune = time.time() - self._last_prune >= PRUNE_EVERY

        def due(conn: sqlite3.Connection) -> list[Any]:
            if prune:
                self._prune(time.time())
            return conn.execute(_DUE, (now, limit)).fetchall()

        return [_decode_ix(row) for row in await self._call(due)]

    async def pending_count(self) -> int:
        """Counted on the partial index of pending interactions."""
        query = "SELECT count(*) FROM interactions WHERE status = 'pending'"
        row = await self._call(lambda conn: conn.execute(query).fetchone())
        return int(row[0])

    async def pending_interactions(self, *, limit: int = 100) -> list[InteractionRecord]:
        """Read on the partial index of pending interactions, which is ordered by expiry."""
        if limit <= 0:
            return []
        rows = await self._call(lambda conn: conn.execute(_PENDING, (limit,)).fetchall())
        return [_decode_ix(row) for row in rows]

    async def settled_runs(self, *, limit: int = 100, after: str | None = None) -> list[str]:
        if limit <= 0:
            return []
        params = (after or "", limit)
        rows = await self._call(lambda conn: conn.execute(_SETTLED, params).fetchall())
        return [str(row[0]) for row in rows]

    # Conversations

    async def set_thread_run(self, channel: str, thread_ts: str, run_id: str) -> None:
        params = (channel, thread_ts, run_id, time.time() + THREAD_TTL)
        await self._call(lambda conn: conn.execute(SET_THREAD_RUN, params))

    async def get_thread_run(self, channel: str, thread_ts: str) -> str | None:
        row = await self._call(
            lambda conn: conn.execute(
                "SELECT run_id FROM threads WHERE channel = ? AND thread_ts = ?",
                (channel, thread_ts),
            ).fetchone()
        )
        return None if row is None else str(row[0])

    async def acquire_thread(self, channel: str, thread_ts: str, *, owner: str, ttl: float) -> bool:
        """Expiry is read from this machine's clock, which every process on the file shares."""
        millis = lease_millis(owner, ttl)
        now = time.time()
        params = (channel, thread_ts, owner, now + millis / 1000, now)
        changed = await self._call(lambda conn: conn.execute(_ACQUIRE_THREAD, params).rowcount)
        return changed == 1

    async def take_thread(
        self, channel: str, thread_ts: str, *, owner: str, ttl: float, initiator: str | None = None
    ) -> ThreadTake:
        millis = lease_millis(owner, ttl)
        now = time.time()
        params = (channel, thread_ts, owner, now + millis / 1000, now)

        def take(conn: sqlite3.Connection) -> tuple[bool, Any]:
            held = conn.execute(_ACQUIRE_THREAD, params).rowcount == 1
            if held and initiator:
                conn.execute(_SET_INITIATOR, (channel, thread_ts, initiator, now + THREAD_TTL))
            return held, conn.execute(_SELECT_STOP, (channel, thread_ts, now)).fetchone()

        held, row = await self._call(lambda conn: _transaction(conn, partial(take, conn)))
        return ThreadTake(held=held, stop=decode_stop_row(row, channel, thread_ts))

    async def release_thread(
        self, channel: str, thread_ts: str, *, owner: str, run_id: str | None = None
    ) -> None:
        keep_until = time.time() + THREAD_TTL

        def release(conn: sqlite3.Connection) -> None:
            if run_id:
                conn.execute(SET_THREAD_RUN, (channel, thread_ts, run_id, keep_until))
            conn.execute(
                "DELETE FROM thread_leases WHERE channel = ? AND thread_ts = ? AND owner = ?",
                (channel, thread_ts, owner),
            )

        await self._call(lambda conn: _transaction(conn, partial(release, conn)))

    async def stop_thread(self, channel: str, thread_ts: str, stop: ThreadStop) -> None:
        params = (channel, thread_ts, encode_stop(stop).decode(), time.time() + STOP_TTL)
        await self._call(
            lambda conn: conn.execute(
                "INSERT INTO thread_stops (channel, thread_ts, rec, keep_until) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (channel, thread_ts) DO UPDATE SET"
                " rec = excluded.rec, keep_until = excluded.keep_until",
                params,
            )
        )

    async def thread_stop(self, channel: str, thread_ts: str) -> ThreadStop | None:
        params = (channel, thread_ts, time.time())
        row = await self._call(lambda conn: conn.execute(_SELECT_STOP, params).fetchone())
        return decode_stop_row(row, channel, thread_ts)

    async def thread_initiator(self, channel: str, thread_ts: str) -> str | None:
        params = (channel, thread_ts, time.time())
        row = await self._call(
            lambda conn: conn.execute(
                "SELECT user FROM thread_initiators"
                " WHERE channel = ? AND thread_ts = ? AND keep_until > ?",
                params,
            ).fetchone()
        )
        return None if row is None else str(row[0])

    async def set_run_stream(self, run_id: str, ts: str) -> None:
        params = (run_id, ts, time.time() + STREAM_TTL)
        await self._call(
            lambda conn: conn.execute(
                "INSERT INTO run_streams (run_id, ts, keep_until) VALUES (?, ?, ?)"
                " ON CONFLICT (run_id) DO UPDATE SET"
                " ts = excluded.ts, keep_until = excluded.keep_until",
                params,
            )
        )

    async def run_stream(self, run_id: str) -> str | None:
        params = (run_id, time.time())
        row = await self._call(
            lambda conn: conn.execute(
                "SELECT ts FROM run_streams WHERE run_id = ? AND keep_until > ?", params
            ).fetchone()
        )
        return None if row is None else str(row[0])

    # App Home

    async def mark_home_opened(self, user: str, *, ttl: float) -> None:
        now = time.time()

        def mark(conn: sqlite3.Connection) -> None:
            conn.execute(_HOME_OPENED, (user, now + ttl))
            conn.execute(_HOME_TRIM, (now, HOME_VIEWER_CAP))

        await self._call(lambda conn: _transaction(conn, partial(mark, conn)))

    async def home_viewers(self, *, limit: int = 500) -> list[str]:
        if limit <= 0:
            return []
        params = (time.time(), limit)
        rows = await self._call(
            lambda conn: conn.execute(
                "SELECT user FROM home_viewers WHERE keep_until > ?"
                " ORDER BY keep_until DESC LIMIT ?",
                params,
            ).fetchall()
        )
        return [str(row[0]) for row in rows]

    # Audit

    async def audit(self, entry: AuditEntry) -> None:
        rec = encode_audit(entry).decode()
        await self._call(lambda conn: _transaction(conn, partial(_append_audit, conn, rec)))

    async def recent_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        if limit <= 0:
            return []
        rows = await self._call(
            lambda conn: conn.execute(
                "SELECT id, rec FROM audit ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        )
        return [decode_audit(rec, key=f"audit/{row_id}") for row_id, rec in rows]
