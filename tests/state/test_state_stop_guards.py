"""A stop is final in the store: the claims that would resume a stopped turn's run read the
thread's stop mark in the same atomic step and refuse (`StopGuard`, `RunRecord.stop_seen`), on
SQLite, a single Redis and a Redis Cluster alike."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

import pytest

from state import AuditEntry, Grant, StopGuard, Store, ThreadStop, stop_mark

from .conftest import grant_id, make_interaction, make_run, make_turn

CHANNEL, THREAD = "C1", "1700000000.000100"
GUARD = StopGuard(run_id="run-1", channel=CHANNEL, thread_ts=THREAD)
EARLIER = ThreadStop(user="U0OLD", at=1700000000.25, event_id="Ev-earlier")
STOP = ThreadStop(user="U0REQ", at=1700000001.5, event_id="Ev-stop")


def _entry(detail: str = "answered") -> AuditEntry:
    return AuditEntry(at=time.time(), action="answered", interaction_id="ix-1", detail=detail)


async def _paused(store: Store, *, seen: ThreadStop | None = None, **fields: Any) -> None:
    """Run `run-1`, paused on `ix-1` in the thread, its turn begun under the mark `seen`."""
    fields.setdefault("thread", (CHANNEL, THREAD))
    await store.save_run(make_run("run-1", stop_seen=stop_mark(seen), **fields))
    await store.add_interactions(
        [make_interaction("ix-1", "run-1", kind="approval", payload={"tool": "deploy"})]
    )


def _claim(store: Store, run_id: str, child_id: str, how: str) -> Awaitable[Any]:
    """A resume's claim as its caller makes it: guarded by the turn's stop (the caller read
    the run) or reading the run, whose own `thread` names the stop to check."""
    if how == "reading":
        return store.claim_run(run_id, child_id=child_id, read=True)
    guard = StopGuard(run_id=run_id, channel=CHANNEL, thread_ts=THREAD)
    return store.claim_run(run_id, child_id=child_id, stop=guard)


CLAIMS = pytest.mark.parametrize("how", ["guarded", "reading"])


@CLAIMS
@pytest.mark.parametrize("seen", [None, EARLIER], ids=["no-earlier-stop", "an-earlier-stop"])
async def test_a_resume_claim_of_a_stopped_turn_loses_and_names_the_stop(
    store: Store, seen: ThreadStop | None, how: str
) -> None:
    if seen is not None:
        await store.stop_thread(CHANNEL, THREAD, seen)
    await _paused(store, seen=seen)
    # The turn's own mark (or none) is no stop of this turn: the claim wins.
    assert (await _claim(store, "run-1", "probe", how)).won
    await store.save_run(make_run("run-1", stop_seen=stop_mark(seen), thread=(CHANNEL, THREAD)))
    stored = await store.load_run("run-1")
    assert stored is not None and stored.resumed_by == "probe"

    await store.save_run(make_run("run-2", stop_seen=stop_mark(seen), thread=(CHANNEL, THREAD)))
    await store.stop_thread(CHANNEL, THREAD, STOP)
    claim = await _claim(store, "run-2", "run-2-child", how)
    assert not claim.won and claim.stopped == STOP
    assert claim.run is not None and claim.run.resumed_by is None
    stored = await store.load_run("run-2")
    assert stored is not None and stored.resumed_by is None
    # The stop's own Cancel claims it unguarded, and once claimed that child wins it again.
    assert (await store.claim_run("run-2", child_id="stop-child")).won
    again = await _claim(store, "run-2", "stop-child", how)
    assert again.won and again.stopped is None


@CLAIMS
async def test_a_run_outside_a_thread_is_never_stopped_by_a_mark(store: Store, how: str) -> None:
    """Runs saved before the store checked stops (no `thread`) resume as they always did."""
    await store.stop_thread(CHANNEL, THREAD, STOP)
    await _paused(store, thread=None)
    claim = await _claim(store, "run-1", "run-1-child", how)
    assert claim.won and claim.stopped is None


async def test_an_answer_to_a_stopped_turn_changes_nothing(store: Store) -> None:
    await _paused(store, seen=None)
    await store.stop_thread(CHANNEL, THREAD, STOP)
    turn = make_turn("run-1", "run-1-child", owner="worker-a", channel=CHANNEL, thread_ts=THREAD)
    for with_turn in (None, turn):
        claim = await store.answer_and_claim(
            "ix-1",
            answer=True,
            answered_by="U0BOB",
            now=time.time(),
            audit=_entry(),
            turn=with_turn,
            stop=GUARD,
        )
        assert not claim.won and claim.stopped == STOP and claim.run is None
        assert claim.record is not None and claim.record.status == "pending"
    assert await store.recent_audit() == []
    stored = await store.load_run("run-1")
    assert stored is not None and stored.resumed_by is None
    # The thread's lease was not taken either.
    assert await store.acquire_thread(CHANNEL, THREAD, owner="someone-else", ttl=30)


async def test_an_answer_before_the_stop_is_taken(store: Store) -> None:
    await store.stop_thread(CHANNEL, THREAD, EARLIER)
    await _paused(store, seen=EARLIER)
    claim = await store.answer_and_claim(
        "ix-1", answer=True, answered_by="U0BOB", now=time.time(), audit=_entry(), stop=GUARD
    )
    assert claim.won and claim.stopped is None


async def test_no_grant_answers_a_stopped_turn(store: Store) -> None:
    now = time.time()
    grant = Grant(
        grant_id=grant_id("ix-0"),
        tool="deploy",
        scope="thread",
        channel=CHANNEL,
        thread_ts=THREAD,
        granted_by="U0BOB",
        created_at=now,
        expires_at=now + 3600,
        interaction_id="ix-0",
        run_id="run-0",
        path="granter.deploy",
        requesters=("U0ALICE",),
    )
    await store.add_grant(grant, audit=_entry("granted"))
    await _paused(store, seen=None)
    await store.stop_thread(CHANNEL, THREAD, STOP)
    claim = await store.answer_under_grant(
        "ix-1",
        grant_id=grant.grant_id,
        answer={"approved": True, "grant": grant.grant_id},
        answered_by="U0BOB",
        now=now,
        audit=_entry("under grant"),
        stop=GUARD,
    )
    assert not claim.won and claim.stopped == STOP
    assert claim.record is not None and claim.record.status == "pending"
    assert [e.detail for e in await store.recent_audit()] == ["granted"]


@pytest.mark.parametrize("layout", [1, 2])
async def test_the_started_mark_is_not_written_once_the_turn_was_stopped(
    store: Store, layout: int
) -> None:
    """The journal's "started" save with a guard (`save_run(stop=...)`): written while the
    thread keeps the turn's own mark, refused (nothing written) once it keeps another."""
    fields: dict[str, Any] = {"thread": (CHANNEL, THREAD), "stop_seen": stop_mark(EARLIER)}
    if layout == 2:
        fields.update(
            layout=2, transcript_id="run-1", transcript=[{"role": "user", "content": "go"}]
        )
    await store.stop_thread(CHANNEL, THREAD, EARLIER)
    running = make_run("run-1", status="running", reason=None, started=["call-1"], **fields)
    assert await store.save_run(running, stop=GUARD)
    stored = await store.load_run("run-1")
    assert stored is not None and stored.started == ["call-1"]

    await store.stop_thread(CHANNEL, THREAD, STOP)
    later = make_run("run-1", status="running", reason=None, started=["call-1", "call-2"], **fields)
    assert not await store.save_run(later, stop=GUARD)
    stored = await store.load_run("run-1")
    assert stored is not None and stored.started == ["call-1"]
    # Unguarded (the stopped run's own last save) it is written.
    assert await store.save_run(later)
    stored = await store.load_run("run-1")
    assert stored is not None and stored.started == ["call-1", "call-2"]
