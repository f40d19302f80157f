"""Answers on SQLite: an interaction answered (alone, with a vote, under a grant, or with the
resume's claims), closed, or its answer or a vote taken back, each a conditional UPDATE in one
transaction."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pydantic_core

from ._approval import approval_of
from ._codec import (
    approves,
    check_now,
    decode_stop,
    encode_answer,
    encode_audit,
    encode_vote,
    lease_millis,
    stopped_since,
    vote_audits,
)
from ._errors import CorruptRecordError, UsageError
from ._records import (
    AnswerClaim,
    AuditEntry,
    InteractionClaim,
    InteractionStatus,
    StopGuard,
    ThreadStop,
    TurnClaim,
    Vote,
)
from ._sqlite_grants import GRANT_ACTIVE
from ._sqlite_ix import IX_COLUMNS, SELECT_IX, decode_ix
from ._sqlite_log import LOAD_RUN, decode_loaded
from ._sqlite_part import SQLitePart
from ._sqlite_tx import append_audit, transaction
from ._withdrawal import drop_votes, withdrawal_audits

__all__ = ["ACQUIRE_THREAD", "SELECT_STOP", "SQLiteAnswers", "decode_stop_row", "stop_row"]


# A late answer (`expires_at <= now`) matches no row and so changes nothing: the record stays
# `pending` for the expiry sweep, which closes it and cancels its run.
_ANSWER = f"""
UPDATE interactions SET status = 'answered', answer = ?, answered_by = ?, answered_at = ?
WHERE interaction_id = ? AND status = 'pending' AND expires_at > ?
RETURNING {IX_COLUMNS}
"""

_CLOSE = f"""
UPDATE interactions SET status = ?, answered_at = ?
WHERE interaction_id = ? AND status = 'pending'
RETURNING {IX_COLUMNS}
"""

_WITHDRAW = f"""
UPDATE interactions
SET status = 'pending', answer = NULL, answered_by = NULL, answered_at = NULL, votes = ?
WHERE interaction_id = ? AND status = 'answered' AND answered_by = ? AND run_id = ?
    AND EXISTS (
        SELECT 1 FROM runs WHERE run_id = ? AND status = 'paused' AND resumed_by IS NULL
    )
RETURNING {IX_COLUMNS}
"""

_SELECT_VOTES = "SELECT votes, status FROM interactions WHERE interaction_id = ?"
_SET_VOTES = "UPDATE interactions SET votes = ? WHERE interaction_id = ?"

# One statement, so SQLite's write lock makes it atomic across processes: the row is inserted, or
# taken over only when its lease has ended (`keep_until <= now`) or is the same owner's. Here for
# the resume's claim; `SQLiteStore.acquire_thread` runs it too.
ACQUIRE_THREAD = """
INSERT INTO thread_leases (channel, thread_ts, owner, keep_until) VALUES (?, ?, ?, ?)
ON CONFLICT (channel, thread_ts) DO UPDATE SET
    owner = excluded.owner, keep_until = excluded.keep_until
WHERE thread_leases.keep_until <= ? OR thread_leases.owner = excluded.owner
"""

# The thread's stop mark while it is kept; params: channel, thread_ts, now. Read with the lease by
# the resume's claim, `SQLiteStore.take_thread` and `SQLiteStore.thread_stop`.
SELECT_STOP = """
SELECT rec FROM thread_stops WHERE channel = ? AND thread_ts = ? AND keep_until > ?
"""

_CLOSING: frozenset[str] = frozenset({"expired", "superseded", "cancelled"})


@dataclass(kw_only=True, frozen=True)
class _Ballot:
    """One vote of several, as `answer_and_claim` counts it."""

    user: str
    vote: str
    """The vote as `encode_vote` writes it."""
    answer: dict[str, Any]
    audits: list[str]
    """The encoded audit entries, the k-th for the k-th vote."""


def decode_stop_row(row: Any, channel: str, thread_ts: str) -> ThreadStop | None:
    """The stop mark of the row `SELECT_STOP` read; None when none is kept. Decoded outside the
    transaction that read it, so a corrupt mark fails the read, never what was written with it."""
    if row is None:
        return None
    return decode_stop(str(row[0]), key=f"thread_stops/{channel}/{thread_ts}")


def stop_row(conn: sqlite3.Connection, guard: StopGuard | None, now: float) -> Any:
    """Inside a claim's transaction: the row of the stop mark that ends the turn of run
    `guard.run_id` (`stopped_since`: the thread keeps another mark than the turn began under),
    else None. Read in the transaction that holds the write lock, so the claim that follows
    cannot be overtaken by a stop."""
    if guard is None:
        return None
    mark = conn.execute(SELECT_STOP, (guard.channel, guard.thread_ts, now)).fetchone()
    if mark is None:
        return None
    rec = conn.execute("SELECT rec FROM runs WHERE run_id = ?", (guard.run_id,)).fetchone()
    if rec is None or not stopped_since(rec[0], mark[0]):
        return None
    return mark


_OPEN = "SELECT 1 FROM interactions WHERE interaction_id = ? AND status = 'pending'"


def _claim_turn(
    conn: sqlite3.Connection, interaction_id: str, turn: TurnClaim, lease_until: float
) -> tuple[Any, Any] | None:
    """Inside the answer's transaction: claim the run and take the thread's lease when the
    answered interaction was the run's only one and both are free; the run's rows and the
    thread's stop mark row (None when none is kept), or None."""
    own = conn.execute(
        "SELECT i.interaction_id FROM run_interactions AS r"
        " JOIN interactions AS i ON i.interaction_id = r.interaction_id"
        " WHERE r.run_id = ? AND i.run_id = ?",
        (turn.run_id, turn.run_id),
    ).fetchall()
    if [row[0] for row in own] != [interaction_id]:
        return None
    run = conn.execute(
        "SELECT 1 FROM runs WHERE run_id = ? AND status = 'paused' AND resumed_by IS NULL",
        (turn.run_id,),
    ).fetchone()
    if run is None:
        return None
    lease, now = turn.lease, time.time()
    taken = conn.execute(
        ACQUIRE_THREAD, (lease.channel, lease.thread_ts, lease.owner, lease_until, now)
    ).rowcount
    if taken != 1:
        return None
    # Checked above in this transaction, which holds the write lock: the claim cannot lose.
    conn.execute("UPDATE runs SET resumed_by = ? WHERE run_id = ?", (turn.child_id, turn.run_id))
    stop = conn.execute(SELECT_STOP, (lease.channel, lease.thread_ts, now)).fetchone()
    # The whole run, transcript included, as `load_run` reads it: the resume needs no other read.
    return conn.execute(LOAD_RUN, (turn.run_id,)).fetchall(), stop


def _rule_needs(conn: sqlite3.Connection, interaction_id: str, needed: int) -> bool:
    """Inside the answer's transaction, for an Approve: False when the interaction is an
    approval whose rule asks for another number of approvers than `needed`, or whose rule does
    not read back (fail closed: a caller that forgot the rule must not let one person approve a
    two-person request)."""
    row = conn.execute(SELECT_IX, (interaction_id,)).fetchone()
    if row is None:
        return True  # the answer that follows finds nothing and loses
    try:
        rule = approval_of(decode_ix(row))
    except CorruptRecordError:
        return False
    return rule is None or rule.count == needed


def _vote(
    conn: sqlite3.Connection, interaction_id: str, ballot: _Ballot, now: float
) -> tuple[str, Any]:
    """Inside the answer's transaction: count `ballot.user`'s vote. `("lost", None)` when the
    interaction is not pending (or gone) or the person voted already, `("partial", None)` when
    more votes are needed, else `("last", answer JSON with the voters' ids)`."""
    row = conn.execute(
        "SELECT status, expires_at, votes FROM interactions WHERE interaction_id = ?",
        (interaction_id,),
    ).fetchone()
    if row is None or row[0] != "pending" or row[1] <= now:
        return "lost", None
    stored: str | None = row[2]
    try:
        votes = pydantic_core.from_json(stored) if stored else []
        users = [str(vote["user"]) for vote in votes]
    except (ValueError, TypeError, KeyError) as exc:
        raise CorruptRecordError(f"interactions/{interaction_id}", "votes", str(exc)) from exc
    if ballot.user in users:
        return "lost", None
    users.append(ballot.user)
    # Appended as text, as the Redis script does: the stored votes are never re-encoded.
    text = f"{stored[:-1]},{ballot.vote}]" if votes and stored else f"[{ballot.vote}]"
    conn.execute(
        "UPDATE interactions SET votes = ? WHERE interaction_id = ?", (text, interaction_id)
    )
    if len(users) < len(ballot.audits):
        append_audit(conn, ballot.audits[len(users) - 1])
        return "partial", None
    return "last", pydantic_core.to_json({**ballot.answer, "approvers": users}).decode()


class SQLiteAnswers(SQLitePart):
    """The answer half of `SQLiteStore`: every change of an interaction's answer."""

    async def answer_and_claim(
        self,
        interaction_id: str,
        *,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry | Sequence[AuditEntry],
        turn: TurnClaim | None = None,
        needed: int = 1,
        stop: StopGuard | None = None,
    ) -> AnswerClaim:
        """The answer (or vote), its audit entry and (with `turn`) the run's claim and the
        thread's lease, in one `BEGIN IMMEDIATE` transaction that checks `stop` first."""
        check_now(now)
        checked = vote_audits(audit, needed=needed, answer=answer)
        entries = [encode_audit(entry).decode() for entry in checked]
        if turn is not None and not turn.child_id:
            raise UsageError("`child_id` must be a non-empty run id")
        approving = approves(answer)
        ballot = None
        if needed > 1:
            vote = encode_vote(Vote(user=answered_by, at=float(now))).decode()
            ballot = _Ballot(user=answered_by, vote=vote, answer=answer, audits=entries)
        lease_until = None
        if turn is not None:
            lease_until = time.time() + lease_millis(turn.lease.owner, turn.lease_ttl) / 1000

        def claim(conn: sqlite3.Connection) -> tuple[bool, Any, Any, bool]:
            answered = encode_answer(answer).decode()
            mark = stop_row(conn, stop, time.time())
            if (
                mark is not None
                and conn.execute(_OPEN + " AND expires_at > ?", (interaction_id, now)).fetchone()
            ):
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone(), mark, False
            if approving and not _rule_needs(conn, interaction_id, needed):
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone(), None, False
            if ballot is not None:
                outcome, answered = _vote(conn, interaction_id, ballot, now)
                if outcome != "last":
                    row = conn.execute(SELECT_IX, (interaction_id,)).fetchone()
                    return outcome == "partial", row, None, outcome == "partial"
            params = (answered, answered_by, now, interaction_id, now)
            rows = conn.execute(_ANSWER, params).fetchall()
            if not rows:
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone(), None, False
            append_audit(conn, entries[-1])
            if turn is None or lease_until is None:
                return True, rows[0], None, False
            return True, rows[0], _claim_turn(conn, interaction_id, turn, lease_until), False

        won, row, claimed, partly = await self._call(
            lambda conn: transaction(conn, partial(claim, conn))
        )
        record = None if row is None else decode_ix(row)
        if not won and claimed is not None and stop is not None:
            stopped = decode_stop_row(claimed, stop.channel, stop.thread_ts)
            return AnswerClaim(won=False, record=record, stopped=stopped)
        if turn is None or claimed is None:
            return AnswerClaim(won=won, record=record, partial=partly)
        run_rows, mark = claimed
        kept = decode_stop_row(mark, turn.lease.channel, turn.lease.thread_ts)
        run = decode_loaded(turn.run_id, run_rows)
        return AnswerClaim(won=won, record=record, run=run, stop=kept)

    async def answer_under_grant(
        self,
        interaction_id: str,
        *,
        grant_id: str,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry,
        stop: StopGuard | None = None,
    ) -> InteractionClaim:
        """The answer and its audit entry, in one transaction that checks the grant (and `stop`)
        first."""
        check_now(now)
        answer_params = (encode_answer(answer).decode(), answered_by, now, interaction_id, now)
        entry = encode_audit(audit).decode()

        def claim(conn: sqlite3.Connection) -> tuple[bool, Any, Any]:
            mark = stop_row(conn, stop, time.time())
            if mark is not None and conn.execute(_OPEN, (interaction_id,)).fetchone():
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone(), mark
            if conn.execute(GRANT_ACTIVE, (grant_id, now)).fetchone() is not None:
                rows = conn.execute(_ANSWER, answer_params).fetchall()
                if rows:
                    append_audit(conn, entry)
                    return True, rows[0], None
            return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone(), None

        won, row, mark = await self._call(lambda conn: transaction(conn, partial(claim, conn)))
        stopped = None
        if mark is not None and stop is not None:
            stopped = decode_stop_row(mark, stop.channel, stop.thread_ts)
        return InteractionClaim(
            won=won, record=None if row is None else decode_ix(row), stopped=stopped
        )

    async def close_interaction(
        self, interaction_id: str, *, status: InteractionStatus, now: float
    ) -> InteractionClaim:
        """Move a pending interaction to `status`; `now` is kept as its `answered_at`."""
        if status not in _CLOSING:
            raise UsageError(f"cannot close an interaction as {status!r}")
        check_now(now)
        return await self._claim_interaction(interaction_id, _CLOSE, (status, now, interaction_id))

    async def withdraw_answer(
        self,
        interaction_id: str,
        *,
        answered_by: str,
        run_id: str,
        audit: AuditEntry | Sequence[AuditEntry],
        voters: Sequence[str] | None = None,
    ) -> InteractionClaim:
        """The votes checked and dropped, the answer cleared and the audit written, in one
        `BEGIN IMMEDIATE` transaction."""
        names, checked = withdrawal_audits(audit, voters=voters, answered_by=answered_by)
        entries = [encode_audit(entry).decode() for entry in checked]
        key = f"interactions/{interaction_id}"

        def withdraw(conn: sqlite3.Connection) -> tuple[bool, Any]:
            stored = conn.execute(_SELECT_VOTES, (interaction_id,)).fetchone()
            kept, dropped, total = drop_votes(stored[0] if stored else None, names, key=key)
            # Votes: each voter named must have one. None: only the approver's own answer.
            taken = dropped == len(names) if total else names == [answered_by]
            if not taken:
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone()
            params = (kept, interaction_id, answered_by, run_id, run_id)
            rows = conn.execute(_WITHDRAW, params).fetchall()
            if not rows:
                return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone()
            for entry in entries:
                append_audit(conn, entry)
            return True, rows[0]

        won, row = await self._call(lambda conn: transaction(conn, partial(withdraw, conn)))
        return InteractionClaim(won=won, record=None if row is None else decode_ix(row))

    async def withdraw_vote(
        self, interaction_id: str, *, user: str, audit: AuditEntry
    ) -> InteractionClaim:
        entry = encode_audit(audit).decode()
        key = f"interactions/{interaction_id}"

        def withdraw(conn: sqlite3.Connection) -> tuple[bool, Any]:
            row = conn.execute(_SELECT_VOTES, (interaction_id,)).fetchone()
            if row is not None and row[1] == "pending":
                kept, dropped, _ = drop_votes(row[0], [user], key=key)
                if dropped:
                    conn.execute(_SET_VOTES, (kept, interaction_id))
                    append_audit(conn, entry)
                    return True, conn.execute(SELECT_IX, (interaction_id,)).fetchone()
            return False, conn.execute(SELECT_IX, (interaction_id,)).fetchone()

        won, row = await self._call(lambda conn: transaction(conn, partial(withdraw, conn)))
        return InteractionClaim(won=won, record=None if row is None else decode_ix(row))
