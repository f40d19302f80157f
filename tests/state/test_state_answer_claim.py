"""`answer_and_claim`: a click's claims in one atomic step and the end of
its work in another, against SQLite, a single Redis and a Redis Cluster alike."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from state import AuditEntry, Store, ThreadStop

from ..conftest import answer_only
from .conftest import make_interaction, make_run, make_turn

if TYPE_CHECKING:
    # The turn is a coordination record; its type comes with the helper that builds it.
    from .conftest import TurnClaim

CHANNEL, THREAD = "C1", "1700000000.000100"


def _entry(user: str = "U1") -> AuditEntry:
    return AuditEntry(at=time.time(), action="answered", interaction_id="ix-1", user=user)


def _turn(owner: str = "worker-a", child: str = "run-child") -> TurnClaim:
    return make_turn("run-1", child, owner=owner, channel=CHANNEL, thread_ts=THREAD)


async def _paused_with(store: Store, *interaction_ids: str) -> None:
    await store.save_run(make_run("run-1"))
    await store.add_interactions([make_interaction(i, "run-1") for i in interaction_ids])


async def test_a_won_answer_writes_its_audit_entry_with_it(store: Store) -> None:
    await _paused_with(store, "ix-1")
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry()
    )
    assert claim.won and claim.record is not None
    assert (claim.record.status, claim.record.answer) == ("answered", "postgres")
    assert claim.run is None  # no turn asked for: the run is left alone
    assert [e.interaction_id for e in await store.recent_audit()] == ["ix-1"]
    run = await store.load_run("run-1")
    assert run is not None and run.resumed_by is None


async def test_the_last_answer_claims_the_run_and_the_thread_lease(store: Store) -> None:
    await _paused_with(store, "ix-1")
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.won and claim.run is not None
    assert (claim.run.run_id, claim.run.resumed_by, claim.run.status) == (
        "run-1",
        "run-child",
        "paused",
    )
    stored = await store.load_run("run-1")
    assert stored is not None and stored.resumed_by == "run-child"
    # The lease is the owner's: another is refused, the owner extends it.
    assert not await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)
    assert await store.acquire_thread(CHANNEL, THREAD, owner="worker-a", ttl=30)
    # Claimed, so not a run to recover; and another child loses it.
    assert await store.settled_runs() == []
    assert not (await store.claim_run("run-1", child_id="run-other")).won


async def test_the_claim_reads_the_threads_stop_mark_with_it(store: Store) -> None:
    """The turn a claim starts learns which stop it starts from in the same step: none yet,
    then the thread's last one (another thread's mark is not it)."""
    await _paused_with(store, "ix-1")
    await store.stop_thread(CHANNEL, "another-thread", ThreadStop(user="U7", at=1.0))
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.run is not None and claim.stop is None

    await store.save_run(make_run("run-2"))
    await store.add_interactions([make_interaction("ix-2", "run-2")])
    mark = ThreadStop(user="U2", at=1700000000.5, event_id="Ev2")
    await store.stop_thread(CHANNEL, THREAD, mark)
    turn = make_turn("run-2", "run-2-child", owner="worker-a", channel=CHANNEL, thread_ts=THREAD)
    claim = await store.answer_and_claim(
        "ix-2", answer="sqlite", answered_by="U1", now=time.time(), audit=_entry(), turn=turn
    )
    assert claim.run is not None and claim.run.run_id == "run-2"
    assert claim.stop == mark


async def test_a_claim_that_takes_no_run_brings_no_stop_mark(store: Store) -> None:
    """Without the run the caller goes the long way, whose lease take reads the mark."""
    await _paused_with(store, "ix-1", "ix-2")
    await store.stop_thread(CHANNEL, THREAD, ThreadStop(user="U2", at=1.0))
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.won and (claim.run, claim.stop) == (None, None)


async def test_a_run_with_another_interaction_is_not_claimed(store: Store) -> None:
    await _paused_with(store, "ix-1", "ix-2")
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.won and claim.run is None
    run = await store.load_run("run-1")
    assert run is not None and run.resumed_by is None
    assert await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)


async def test_a_busy_thread_leaves_the_run_unclaimed(store: Store) -> None:
    await _paused_with(store, "ix-1")
    assert await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.won and claim.run is None
    run = await store.load_run("run-1")
    assert run is not None and run.resumed_by is None
    assert not await store.acquire_thread(CHANNEL, THREAD, owner="worker-a", ttl=30)
    # Settled but unclaimed: recovery would find it if nobody resumed it.
    assert await store.settled_runs() == ["run-1"]


async def test_a_run_claimed_already_is_not_claimed_again(store: Store) -> None:
    await _paused_with(store, "ix-1")
    assert (await store.claim_run("run-1", child_id="run-first")).won
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert claim.won and claim.run is None
    run = await store.load_run("run-1")
    assert run is not None and run.resumed_by == "run-first"
    assert await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)


async def test_a_lost_answer_writes_no_audit_entry_and_claims_nothing(store: Store) -> None:
    await _paused_with(store, "ix-1")
    await answer_only(store, "ix-1", answer="sqlite", answered_by="U9", now=time.time())
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert not claim.won and claim.run is None
    assert claim.record is not None and claim.record.answered_by == "U9"
    # Only the winner's entry: the lost answer wrote none.
    assert [e.user for e in await store.recent_audit()] == ["U9"]
    assert await store.acquire_thread(CHANNEL, THREAD, owner="other", ttl=30)


async def test_a_late_answer_changes_nothing(store: Store) -> None:
    await store.save_run(make_run("run-1"))
    await store.add_interactions([make_interaction("ix-1", expires_at=time.time() - 1)])
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert not claim.won and claim.run is None
    assert claim.record is not None and claim.record.status == "pending"
    assert await store.recent_audit() == []


async def test_a_missing_interaction_is_lost(store: Store) -> None:
    claim = await store.answer_and_claim(
        "ix-1", answer="postgres", answered_by="U1", now=time.time(), audit=_entry(), turn=_turn()
    )
    assert (claim.won, claim.record, claim.run) == (False, None, None)


async def test_thirty_concurrent_clicks_claim_the_answer_and_the_run_once(store: Store) -> None:
    await _paused_with(store, "ix-1")
    now = time.time()
    claims = await asyncio.gather(
        *(
            store.answer_and_claim(
                "ix-1",
                answer=n,
                answered_by=f"U{n}",
                now=now,
                audit=_entry(f"U{n}"),
                turn=_turn(owner=f"worker-{n}", child=f"run-child-{n}"),
            )
            for n in range(30)
        )
    )
    winners = [n for n, claim in enumerate(claims) if claim.won]
    assert len(winners) == 1
    (n,) = winners
    assert [claim.run is not None for claim in claims].count(True) == 1
    assert claims[n].run is not None and claims[n].run.resumed_by == f"run-child-{n}"
    assert [e.user for e in await store.recent_audit()] == [f"U{n}"]
