"""Odd values at every store call, on both stores: ids that are hard to key, times at the
edges of a float, limits that read nothing, falsy answers and records of megabytes."""

from __future__ import annotations

import time
from typing import Any

import pytest

from state import (
    AuditEntry,
    InteractionRecord,
    Store,
)

from ..conftest import answer_only
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
    claim = await answer_only(store, ident, answer=ident, answered_by=ident, now=now)
    assert claim.won and answered(claim.record).answered_by == ident
    await store.close_interaction(f"{ident}/late", status="expired", now=now)
    assert await store.settled_runs() == [ident]
    run_claim = await store.claim_run(ident, child_id=ident)
    assert run_claim.won and run_claim.run is not None and run_claim.run.resumed_by == ident
    await store.set_thread_run(ident, ident, ident)
    assert await store.get_thread_run(ident, ident) == ident
    assert await store.enqueue("event", {"n": 1}, dedupe=ident) is not None
    assert await store.enqueue("event", {"n": 2}, dedupe=ident) is None
    await store.audit(AuditEntry(at=now, action="answered", interaction_id=ident, user=ident))
    assert (await store.recent_audit(limit=1))[0].interaction_id == ident


async def test_settled_runs_page_through_odd_ids_in_byte_order(store: Store) -> None:
    """Redis orders the index with memcmp and SQLite with BINARY: both are UTF-8 byte order,
    which is code point order, so `after` pages the same way on both."""
    now = time.time()
    for n, ident in enumerate(ODD_IDS):
        await store.save_run(make_run(ident))
        await store.add_interactions([make_interaction(f"ix-{n}", run_id=ident)])
        await answer_only(store, f"ix-{n}", answer=n, answered_by="U1", now=now)
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


async def test_an_expiry_far_in_the_future_is_kept_and_answerable(store: Store) -> None:
    """A TTL setting of `1e20` seconds: Redis refused the key's TTL before the cap."""
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1", expires_at=1e20)])
    record = await store.get_interaction("ix-1")
    assert record is not None and record.expires_at == 1e20
    assert await store.due_interactions(time.time() + 1e9) == []
    claim = await answer_only(store, "ix-1", answer=1, answered_by="U1", now=time.time())
    assert claim.won


async def test_a_negative_expiry_is_already_due_and_unanswerable(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", expires_at=-5.0)])
    assert [r.interaction_id for r in await store.due_interactions(0.0)] == ["ix-1"]
    claim = await answer_only(store, "ix-1", answer=1, answered_by="U1", now=time.time())
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
        await answer_only(store, "ix-1", answer=1, answered_by="U1", now=nan)
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


@pytest.mark.parametrize("answer", [None, False, 0, "", [], {}])
async def test_a_falsy_answer_is_an_answer_for_good(store: Store, answer: Any) -> None:
    """Stored JSON `null` is not a missing answer: no re-add, second answer or sweep undoes it."""
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1")])
    assert (await answer_only(store, "ix-1", answer=answer, answered_by="U1", now=1.0)).won
    await store.add_interactions([make_interaction("ix-1", payload={"question": "changed?"})])
    second = await answer_only(store, "ix-1", answer="other", answered_by="U2", now=2.0)
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


async def test_a_five_megabyte_run_and_interaction_round_trip(store: Store) -> None:
    big = "x" * (5 * 1024 * 1024)
    run = make_run(transcript=[{"role": "user", "content": big}], answers={"ix-1": big})
    await store.save_run(run)
    assert await store.load_run("run-1") == run
    claim = await store.claim_run("run-1", child_id="child")
    assert claim.won and claim.run is not None and claim.run.transcript == run.transcript
    await store.add_interactions([make_interaction("ix-1", payload={"text": big})])
    won = await answer_only(store, "ix-1", answer=big, answered_by="U1", now=time.time())
    record = answered(won.record)
    assert won.won and record.answer == big and record.payload == {"text": big}
