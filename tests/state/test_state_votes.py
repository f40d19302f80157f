"""`answer_and_claim(needed=N)`: votes of distinct people (the two-person rule), counted
atomically with the answer, its audit entry and the run's claim, on every store kind."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from state import AuditEntry, SQLiteStore, Store, open_store

from .conftest import make_interaction, make_run, make_turn

if TYPE_CHECKING:
    # The claim and the turn are coordination records; their types come with the helpers.
    from ..conftest import AnswerClaim
    from .conftest import TurnClaim

CHANNEL, THREAD = "C1", "1700000000.000100"
APPROVE = {"approved": True}


def _entries(user: str, needed: int = 2) -> list[AuditEntry]:
    return [
        AuditEntry(
            at=time.time(),
            action="answered",
            interaction_id="ix-1",
            user=user,
            detail=f"approved {k} of {needed}",
        )
        for k in range(1, needed + 1)
    ]


def _turn(owner: str = "worker-a", child: str = "run-child") -> TurnClaim:
    return make_turn("run-1", child, owner=owner, channel=CHANNEL, thread_ts=THREAD)


async def _approval(store: Store, count: int = 2, **fields: object) -> None:
    await store.save_run(make_run("run-1"))
    record = make_interaction(
        "ix-1", "run-1", kind="approval", payload={"tool": "deploy", "rule": {"count": count}}
    )
    for name, value in fields.items():
        setattr(record, name, value)
    await store.add_interactions([record])


async def _vote(
    store: Store, user: str, *, needed: int = 2, turn: TurnClaim | None = None, now: float = 0.0
) -> AnswerClaim:
    return await store.answer_and_claim(
        "ix-1",
        answer=APPROVE,
        answered_by=user,
        now=now or time.time(),
        audit=_entries(user, needed),
        turn=turn,
        needed=needed,
    )


async def test_a_first_vote_is_counted_and_the_interaction_stays_pending(store: Store) -> None:
    await _approval(store)
    claim = await store.answer_and_claim(
        "ix-1",
        answer=APPROVE,
        answered_by="UBOB",
        now=1_700_000_000.123456789,
        audit=_entries("UBOB"),
        turn=_turn(),
        needed=2,
    )
    assert claim.won and claim.partial and claim.run is None
    assert claim.record is not None and claim.record.status == "pending"
    assert [(v.user, v.at) for v in claim.record.votes] == [("UBOB", 1_700_000_000.123456789)]
    assert claim.record.answer is None and claim.record.answered_by is None
    # Read back the same, the time unrounded; the run is left alone and still waits.
    stored = await store.get_interaction("ix-1")
    assert stored is not None and stored.votes == claim.record.votes
    assert [e.detail for e in await store.recent_audit()] == ["approved 1 of 2"]
    run = await store.load_run("run-1")
    assert run is not None and run.resumed_by is None
    assert await store.settled_runs() == []
    assert [r.interaction_id for r in await store.due_interactions(time.time() + 7200)] == ["ix-1"]


async def test_the_last_vote_answers_with_every_approver_and_claims_the_run(store: Store) -> None:
    await _approval(store)
    await _vote(store, "UBOB")
    claim = await store.answer_and_claim(
        "ix-1",
        answer=APPROVE,
        answered_by="UCAROL",
        now=time.time(),
        audit=_entries("UCAROL"),
        turn=_turn(),
        needed=2,
    )
    assert claim.won and not claim.partial and claim.run is not None
    assert claim.run.resumed_by == "run-child"
    record = claim.record
    assert record is not None and record.status == "answered"
    assert record.answer == {"approved": True, "approvers": ["UBOB", "UCAROL"]}
    assert record.answered_by == "UCAROL"
    assert [v.user for v in record.votes] == ["UBOB", "UCAROL"]
    assert [e.detail for e in await store.recent_audit()] == ["approved 2 of 2", "approved 1 of 2"]
    assert not await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)


async def test_the_same_person_twice_counts_once(store: Store) -> None:
    await _approval(store)
    await _vote(store, "UBOB")
    again = await _vote(store, "UBOB", turn=_turn())
    assert not again.won and not again.partial and again.run is None
    record = again.record
    assert record is not None
    assert record.status == "pending" and [v.user for v in record.votes] == ["UBOB"]
    assert len(await store.recent_audit()) == 1


async def test_three_votes_of_three_needed(store: Store) -> None:
    await _approval(store, count=3)
    outcomes = []
    for user in ("UA", "UB", "UA", "UC", "UD"):
        claim = await _vote(store, user, needed=3)
        outcomes.append((claim.won, claim.partial))
    assert outcomes == [(True, True), (True, True), (False, False), (True, False), (False, False)]
    record = await store.get_interaction("ix-1")
    assert record is not None and record.answer["approvers"] == ["UA", "UB", "UC"]


async def test_a_denial_after_a_vote_ends_it_and_keeps_the_vote(store: Store) -> None:
    await _approval(store)
    await _vote(store, "UBOB")
    denial = AuditEntry(at=time.time(), action="answered", interaction_id="ix-1", user="UCAROL")
    claim = await store.answer_and_claim(
        "ix-1",
        answer={"approved": False, "reason": "not today"},
        answered_by="UCAROL",
        now=time.time(),
        audit=denial,
        turn=_turn(),
    )
    assert claim.won and claim.run is not None
    record = claim.record
    assert record is not None and record.status == "answered"
    assert record.answer == {"approved": False, "reason": "not today"}
    assert [v.user for v in record.votes] == ["UBOB"]
    late = await _vote(store, "UDAVE")
    assert not late.won


async def test_a_late_vote_changes_nothing(store: Store) -> None:
    await _approval(store, expires_at=time.time() - 1)
    claim = await _vote(store, "UBOB")
    assert not claim.won and not claim.partial
    assert claim.record is not None and claim.record.votes == []
    assert await store.recent_audit() == []


async def test_votes_need_an_object_answer_and_an_entry_per_vote(store: Store) -> None:
    await _approval(store)
    with pytest.raises(ValueError, match="audit entries"):
        await store.answer_and_claim(
            "ix-1",
            answer=APPROVE,
            answered_by="U1",
            now=time.time(),
            audit=_entries("U1", 1),
            needed=2,
        )
    with pytest.raises(ValueError, match="object"):
        await store.answer_and_claim(
            "ix-1", answer=True, answered_by="U1", now=time.time(), audit=_entries("U1"), needed=2
        )
    with pytest.raises(ValueError, match="positive"):
        await store.answer_and_claim(
            "ix-1", answer=APPROVE, answered_by="U1", now=time.time(), audit=[], needed=0
        )
    record = await store.get_interaction("ix-1")
    assert record is not None and record.votes == [] and record.status == "pending"


async def test_an_approve_that_does_not_match_the_rule_loses(store: Store) -> None:
    """A caller that forgot the rule (`needed=1` for a two-person approval) approves nothing."""
    await _approval(store)
    for answer in (True, {"approved": True}):
        claim = await store.answer_and_claim(
            "ix-1",
            answer=answer,
            answered_by="UBOB",
            now=time.time(),
            audit=_entries("UBOB", 1),
            turn=_turn(),
        )
        assert not claim.won and claim.run is None
        assert claim.record is not None and claim.record.status == "pending"
    three = await _vote(store, "UBOB", needed=3)
    assert not three.won and three.record is not None and three.record.votes == []
    assert await store.recent_audit() == []


async def test_the_rule_is_read_as_approval_of_reads_it(store: Store) -> None:
    await store.save_run(make_run("run-1"))
    plain = make_interaction("ix-1", "run-1", kind="approval", payload={"tool": "deploy"})
    corrupt = make_interaction(
        "ix-2", "run-1", kind="approval", payload={"tool": "deploy", "rule": {"count": "two"}}
    )
    question = make_interaction("ix-3", "run-1", payload={"question": "ok?"})
    await store.add_interactions([plain, corrupt, question])

    async def answer(interaction_id: str) -> bool:
        claim = await store.answer_and_claim(
            interaction_id,
            answer=True,
            answered_by="UBOB",
            now=time.time(),
            audit=_entries("UBOB", 1),
        )
        return claim.won

    # No rule: `Approval()`, one approver. A rule that does not read back: nobody. Not an
    # approval: no rule to check.
    assert [await answer(i) for i in ("ix-1", "ix-2", "ix-3")] == [True, False, True]


async def test_thirty_concurrent_votes_count_two_people_and_claim_the_run_once(
    store: Store, store_url: str
) -> None:
    """Three approvers clicking ten times each, from three connections: two votes count, the
    answer names those two, the run is claimed once and the audit log has two entries."""
    await _approval(store)
    now = time.time()
    async with open_store(store_url) as second, open_store(store_url) as third:
        stores = (store, second, third)
        claims = await asyncio.gather(
            *(
                stores[n % 3].answer_and_claim(
                    "ix-1",
                    answer=APPROVE,
                    answered_by=f"U{n % 3}",
                    now=now,
                    audit=_entries(f"U{n % 3}"),
                    turn=_turn(owner=f"worker-{n}", child=f"run-child-{n}"),
                    needed=2,
                )
                for n in range(30)
            )
        )
    assert [c.partial for c in claims].count(True) == 1
    assert [c.won and not c.partial for c in claims].count(True) == 1
    assert [c.run is not None for c in claims].count(True) == 1
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "answered"
    approvers = record.answer["approvers"]
    assert len(set(approvers)) == 2 and [v.user for v in record.votes] == approvers
    assert sorted(e.detail for e in await store.recent_audit()) == [
        "approved 1 of 2",
        "approved 2 of 2",
    ]


async def test_a_file_written_before_votes_gets_the_column(tmp_path: Path) -> None:
    path = f"{tmp_path}/old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE interactions (interaction_id TEXT PRIMARY KEY, run_id TEXT NOT NULL,"
            " rec TEXT NOT NULL, status TEXT NOT NULL, expires_at REAL NOT NULL, answer TEXT,"
            " answered_by TEXT, answered_at REAL, channel TEXT, message_ts TEXT,"
            " keep_until REAL NOT NULL)"
        )
    conn.close()
    async with SQLiteStore(str(path)) as store:
        await _approval(store)
        claim = await _vote(store, "UBOB")
        assert claim.partial
