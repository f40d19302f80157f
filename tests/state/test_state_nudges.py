"""Reminders, escalations and withdrawn answers: the store's half of the contract, on every
store (SQLite, Redis, Redis Cluster)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from state import Approval, AuditEntry, InteractionRecord, SQLiteStore, Store, open_store

from ..conftest import answer_only
from .conftest import make_interaction, make_run, raw_sqlite

T0 = 1_900_000_000.0
"""Created at; due times are computed from it, so the tests choose `now` freely."""


def approval(
    interaction_id: str = "ix-1", run_id: str = "run-1", *, rule: Approval | None = None, **kw: Any
) -> InteractionRecord:
    rule = rule or Approval(remind_after=60, escalate_to=["U0DAVE"], escalate_after=30)
    values: dict[str, Any] = {
        "kind": "approval",
        "payload": {"tool": "deploy", "arguments": {"service": "api"}, "rule": rule.to_json()},
        "response_schema": {"type": "boolean"},
        "created_at": T0,
        "expires_at": T0 + 3600,
    }
    values.update(kw)
    return make_interaction(interaction_id, run_id, **values)


async def test_a_reminder_is_due_after_remind_after_and_fires_once(store: Store) -> None:
    await store.add_interactions([approval()])
    assert await store.due_nudges(T0 + 59.9) == []
    due = await store.due_nudges(T0 + 60)
    assert [(n.kind, n.due_at, n.record.interaction_id) for n in due] == [
        ("reminder", T0 + 60, "ix-1")
    ]
    # Not due before its time, whoever asks.
    assert not (await store.mark_nudged("ix-1", "reminder", now=T0 + 59)).won
    claim = await store.mark_nudged("ix-1", "reminder", now=T0 + 61)
    assert claim.won and claim.record is not None
    assert claim.record.reminded_at == T0 + 61 and claim.record.escalated_at is None
    assert not (await store.mark_nudged("ix-1", "reminder", now=T0 + 62)).won
    assert await store.due_nudges(T0 + 89) == []
    stored = await store.get_interaction("ix-1")
    assert stored is not None and stored.reminded_at == T0 + 61


async def test_the_escalation_follows_the_reminder_once(store: Store) -> None:
    await store.add_interactions([approval()])
    # Both are due, but the escalation never comes before the reminder.
    assert not (await store.mark_nudged("ix-1", "escalation", now=T0 + 100)).won
    assert [n.kind for n in await store.due_nudges(T0 + 100)] == ["reminder"]
    assert (await store.mark_nudged("ix-1", "reminder", now=T0 + 100)).won
    due = await store.due_nudges(T0 + 100)
    assert [(n.kind, n.due_at) for n in due] == [("escalation", T0 + 90)]
    claim = await store.mark_nudged("ix-1", "escalation", now=T0 + 100)
    assert claim.won and claim.record is not None and claim.record.escalated_at == T0 + 100
    assert not (await store.mark_nudged("ix-1", "escalation", now=T0 + 101)).won
    assert await store.due_nudges(T0 + 3000) == []


async def test_no_rule_no_nudge(store: Store) -> None:
    await store.add_interactions(
        [
            approval("plain", rule=Approval()),
            approval("remind-only", rule=Approval(remind_after=10)),
            make_interaction("question", created_at=T0, expires_at=T0 + 3600),
        ]
    )
    assert [n.record.interaction_id for n in await store.due_nudges(T0 + 1000)] == ["remind-only"]
    assert not (await store.mark_nudged("plain", "reminder", now=T0 + 1000)).won
    assert not (await store.mark_nudged("question", "reminder", now=T0 + 1000)).won
    assert (await store.mark_nudged("remind-only", "reminder", now=T0 + 1000)).won
    assert not (await store.mark_nudged("remind-only", "escalation", now=T0 + 1000)).won
    assert await store.due_nudges(T0 + 3000) == []


async def test_never_for_an_answered_closed_or_expired_request(store: Store) -> None:
    await store.add_interactions(
        [approval("answered"), approval("cancelled"), approval("expiring", expires_at=T0 + 70)]
    )
    assert (await answer_only(store, "answered", answer=True, answered_by="U1", now=T0)).won
    await store.close_interaction("cancelled", status="cancelled", now=T0)
    assert [n.record.interaction_id for n in await store.due_nudges(T0 + 65)] == ["expiring"]
    assert await store.due_nudges(T0 + 70) == []
    for ix in ("answered", "cancelled", "expiring"):
        assert not (await store.mark_nudged(ix, "reminder", now=T0 + 70)).won
    assert not (await store.mark_nudged("missing", "reminder", now=T0 + 70)).won


async def test_due_nudges_come_soonest_first_and_respect_the_limit(store: Store) -> None:
    records = [
        approval(f"ix-{i}", created_at=T0 + i, rule=Approval(remind_after=60)) for i in (3, 1, 2)
    ]
    await store.add_interactions(records)
    due = await store.due_nudges(T0 + 100)
    assert [n.record.interaction_id for n in due] == ["ix-1", "ix-2", "ix-3"]
    assert [n.record.interaction_id for n in await store.due_nudges(T0 + 100, limit=2)] == [
        "ix-1",
        "ix-2",
    ]
    assert await store.due_nudges(T0 + 100, limit=0) == []


async def test_a_pending_request_added_again_keeps_its_fired_nudges(store: Store) -> None:
    await store.add_interactions([approval()])
    assert (await store.mark_nudged("ix-1", "reminder", now=T0 + 60)).won
    # The run paused again on the same request: the record is replaced, the reminder stays
    # fired, and a mark the writer brings along is not taken.
    await store.add_interactions([approval(escalated_at=T0 + 1)])
    stored = await store.get_interaction("ix-1")
    assert stored is not None
    assert (stored.reminded_at, stored.escalated_at) == (T0 + 60, None)
    assert not (await store.mark_nudged("ix-1", "reminder", now=T0 + 95)).won
    assert [n.kind for n in await store.due_nudges(T0 + 95)] == ["escalation"]


async def test_concurrent_markers_one_wins(store: Store, store_url: str) -> None:
    await store.add_interactions([approval()])
    async with open_store(store_url) as other:
        claims = await asyncio.gather(
            *(
                (store if i % 2 else other).mark_nudged("ix-1", "reminder", now=T0 + 60 + i)
                for i in range(20)
            )
        )
        assert sum(claim.won for claim in claims) == 1
        claims = await asyncio.gather(
            *(
                (store if i % 2 else other).mark_nudged("ix-1", "escalation", now=T0 + 90 + i)
                for i in range(20)
            )
        )
        assert sum(claim.won for claim in claims) == 1


def _entry(user: str = "U0BOB") -> AuditEntry:
    return AuditEntry(
        at=time.time(), action="withdrawn", interaction_id="ix-1", run_id="run-1", user=user
    )


async def test_withdrawing_an_answer_reopens_it_while_the_run_is_unclaimed(store: Store) -> None:
    await store.save_run(make_run("run-1"))
    await store.add_interactions([approval()])
    now = time.time()
    assert (await answer_only(store, "ix-1", answer=True, answered_by="U0BOB", now=now)).won
    # Only the answer of that person, of that run.
    wrong = await store.withdraw_answer(
        "ix-1", answered_by="U0CAROL", run_id="run-1", audit=_entry()
    )
    assert not wrong.won
    assert not (
        await store.withdraw_answer("ix-1", answered_by="U0BOB", run_id="run-2", audit=_entry())
    ).won
    claim = await store.withdraw_answer("ix-1", answered_by="U0BOB", run_id="run-1", audit=_entry())
    assert claim.won and claim.record is not None
    record = claim.record
    assert (record.status, record.answer, record.answered_by, record.answered_at) == (
        "pending",
        None,
        None,
        None,
    )
    assert await store.pending_count() == 1
    # Newest first: the withdrawal, over the answer it took back (written with the answer).
    assert [e.action for e in await store.recent_audit()] == ["withdrawn", "answered"]
    assert await store.settled_runs() == []
    # Pending again: its reminder can still come, and it can be answered again.
    assert [n.kind for n in await store.due_nudges(T0 + 60)] == ["reminder"]
    again = await answer_only(store, "ix-1", answer=True, answered_by="U0DAVE", now=now)
    assert again.won and again.record is not None and again.record.answered_by == "U0DAVE"
    assert not (
        await store.withdraw_answer("ix-1", answered_by="U0BOB", run_id="run-1", audit=_entry())
    ).won


async def test_an_answer_the_run_resumed_with_cannot_be_withdrawn(store: Store) -> None:
    await store.save_run(make_run("run-1"))
    await store.add_interactions([approval()])
    now = time.time()
    assert (await answer_only(store, "ix-1", answer=True, answered_by="U0BOB", now=now)).won
    assert (await store.claim_run("run-1", child_id="run-2")).won
    claim = await store.withdraw_answer("ix-1", answered_by="U0BOB", run_id="run-1", audit=_entry())
    assert not claim.won and claim.record is not None and claim.record.status == "answered"
    # Only the answer's own entry: the refused withdrawal wrote none.
    assert [e.action for e in await store.recent_audit()] == ["answered"]
    # A pending one has no answer to withdraw.
    await store.save_run(make_run("run-3"))
    await store.add_interactions([approval("ix-3", "run-3")])
    assert not (
        await store.withdraw_answer("ix-3", answered_by="U0BOB", run_id="run-3", audit=_entry())
    ).won


async def test_withdrawal_and_claim_race_one_wins(store: Store) -> None:
    for attempt in range(5):
        run_id, ix = f"run-{attempt}", f"ix-{attempt}"
        await store.save_run(make_run(run_id))
        await store.add_interactions([approval(ix, run_id)])
        now = time.time()
        assert (await answer_only(store, ix, answer=True, answered_by="U0BOB", now=now)).won
        withdrawn, claimed = await asyncio.gather(
            store.withdraw_answer(ix, answered_by="U0BOB", run_id=run_id, audit=_entry()),
            store.claim_run(run_id, child_id=f"{run_id}-child"),
        )
        record = await store.get_interaction(ix)
        assert record is not None
        # Either the run resumed with the answer, or the answer is gone: never both.
        if withdrawn.won:
            assert record.status == "pending"
        else:
            assert claimed.won and record.status == "answered"


async def test_a_sqlite_file_from_before_nudges_gets_the_columns(sqlite_store_url: str) -> None:
    async with open_store(sqlite_store_url) as store:
        assert isinstance(store, SQLiteStore)
        await store.add_interactions([approval()])
    with raw_sqlite(sqlite_store_url) as conn:
        conn.execute("DROP INDEX interactions_nudges")
        for column in ("remind_at", "escalate_at", "reminded_at", "escalated_at"):
            conn.execute(f"ALTER TABLE interactions DROP COLUMN {column}")
    conn.close()
    async with open_store(sqlite_store_url) as store:
        record = await store.get_interaction("ix-1")
        assert record is not None and record.reminded_at is None
        # Rows from before have no due times; new ones do.
        assert await store.due_nudges(T0 + 1000) == []
        await store.add_interactions([approval("ix-2")])
        assert [n.record.interaction_id for n in await store.due_nudges(T0 + 60)] == ["ix-2"]


@pytest.mark.parametrize("kind", ["later", "soon"])
async def test_mark_nudged_refuses_an_unknown_kind(store: Store, kind: str) -> None:
    with pytest.raises(ValueError, match="not a nudge"):
        await store.mark_nudged("ix-1", kind, now=T0)  # type: ignore[arg-type]
