"""The interaction half of the store contract, against SQLite and Redis alike."""

from __future__ import annotations

import asyncio
import time

import pytest

from state import CorruptRecordError, Store

from ..conftest import answer_only
from .conftest import make_interaction, overwrite_raw


async def test_add_then_get_returns_every_field(store: Store) -> None:
    record = make_interaction(
        "ix-ü",
        kind="approval",
        payload={"tool": "restart", "arguments": {"host": "db-1 ✓"}, "empty": [], "none": None},
        response_schema={"type": "boolean"},
        tool_call_id="call_7",
        channel="C42",
        thread_ts="1700000000.000200",
        message_ts="1700000001.000300",
        requester="U1",
        created_at=1_700_000_000.25,
        expires_at=time.time() + 60.5,
    )
    await store.add_interactions([record])
    assert await store.get_interaction("ix-ü") == record


async def test_get_of_a_missing_interaction_is_none(store: Store) -> None:
    assert await store.get_interaction("nope") is None


async def test_adding_nothing_is_fine(store: Store) -> None:
    await store.add_interactions([])


async def test_a_pending_interaction_is_replaced_but_an_answered_one_is_kept(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", payload={"v": 1})])
    await store.add_interactions([make_interaction("ix-1", payload={"v": 2})])
    record = await store.get_interaction("ix-1")
    assert record is not None and record.payload == {"v": 2}

    assert (await answer_only(store, "ix-1", answer="yes", answered_by="U1", now=time.time())).won
    await store.add_interactions([make_interaction("ix-1", payload={"v": 3})])
    record = await store.get_interaction("ix-1")
    assert record is not None
    assert (record.payload, record.status, record.answer) == ({"v": 2}, "answered", "yes")


async def test_run_interactions_keep_the_order_they_were_added(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-c"), make_interaction("ix-a")])
    await store.add_interactions([make_interaction("other", run_id="run-2")])
    await store.add_interactions([make_interaction("ix-b"), make_interaction("ix-a")])

    listed = await store.run_interactions("run-1")
    assert [record.interaction_id for record in listed] == ["ix-c", "ix-a", "ix-b"]
    assert [record.interaction_id for record in await store.run_interactions("run-2")] == ["other"]
    assert await store.run_interactions("no-run") == []


async def test_a_pending_interaction_re_added_by_a_child_run_moves_to_it(store: Store) -> None:
    """A resume that answers a subset pauses again with the same ids under the new run."""
    await store.add_interactions([make_interaction("ix-1"), make_interaction("ix-2")])
    await answer_only(store, "ix-1", answer=True, answered_by="U1", now=time.time())
    await store.add_interactions([make_interaction("ix-2", run_id="run-child")])

    assert [r.interaction_id for r in await store.run_interactions("run-1")] == ["ix-1"]
    moved = await store.run_interactions("run-child")
    assert [(r.interaction_id, r.run_id) for r in moved] == [("ix-2", "run-child")]


async def test_set_message_records_where_the_card_is(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", channel="", message_ts=None)])
    await store.set_message("ix-1", channel="C9", message_ts="1700000009.000900")
    record = await store.get_interaction("ix-1")
    assert record is not None
    assert (record.channel, record.message_ts) == ("C9", "1700000009.000900")

    await answer_only(store, "ix-1", answer=1, answered_by="U1", now=time.time())
    answered = await store.get_interaction("ix-1")
    assert answered is not None and answered.message_ts == "1700000009.000900"


async def test_set_message_of_a_missing_interaction_creates_nothing(store: Store) -> None:
    await store.set_message("nope", channel="C9", message_ts="1.2")
    assert await store.get_interaction("nope") is None


async def test_the_first_answer_wins_and_later_ones_see_it(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    now = time.time()
    answer = {"choice": "postgres", "extra": [1, None, "ü"]}
    first = await answer_only(store, "ix-1", answer=answer, answered_by="U1", now=now)
    second = await answer_only(store, "ix-1", answer="sqlite", answered_by="U2", now=now)

    assert first.won and first.record is not None
    assert (first.record.status, first.record.answer) == ("answered", answer)
    assert (first.record.answered_by, first.record.answered_at) == ("U1", now)
    assert not second.won
    assert second.record == first.record
    assert await store.get_interaction("ix-1") == first.record


@pytest.mark.parametrize("answer", [None, False, 0, "", [], {}, "no"])
async def test_any_json_answer_is_kept_exactly(store: Store, answer: object) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    claim = await answer_only(store, "ix-1", answer=answer, answered_by="U1", now=time.time())
    assert claim.won and claim.record is not None and claim.record.answer == answer
    stored = await store.get_interaction("ix-1")
    assert stored is not None and stored.answer == answer and type(stored.answer) is type(answer)


async def test_thirty_concurrent_answers_have_exactly_one_winner(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    now = time.time()
    claims = await asyncio.gather(
        *(answer_only(store, "ix-1", answer=n, answered_by=f"U{n}", now=now) for n in range(30))
    )
    winners = [n for n, claim in enumerate(claims) if claim.won]
    assert len(winners) == 1
    (n,) = winners
    for claim in claims:
        assert claim.record is not None
        assert (claim.record.answered_by, claim.record.answer) == (f"U{n}", n)
    stored = await store.get_interaction("ix-1")
    assert stored is not None and stored.answered_by == f"U{n}"


async def test_an_answer_at_or_after_expiry_is_lost_and_changes_nothing(store: Store) -> None:
    """Documented choice: the record stays `pending` so the expiry sweep still closes it."""
    expires_at = time.time() - 1
    await store.add_interactions([make_interaction("ix-1", expires_at=expires_at)])
    for now in (expires_at, expires_at + 10):
        claim = await answer_only(store, "ix-1", answer="x", answered_by="U1", now=now)
        assert not claim.won
        assert claim.record is not None
        assert claim.record.status == "pending" and claim.record.expires_at <= now
        assert claim.record.answered_by is None
    due = await store.due_interactions(time.time())
    assert [record.interaction_id for record in due] == ["ix-1"]


async def test_an_answer_just_before_expiry_wins(store: Store) -> None:
    expires_at = time.time() + 5
    await store.add_interactions([make_interaction("ix-1", expires_at=expires_at)])
    claim = await answer_only(store, "ix-1", answer="x", answered_by="U1", now=expires_at - 0.001)
    assert claim.won


async def test_answering_a_missing_interaction_is_lost(store: Store) -> None:
    claim = await answer_only(store, "nope", answer=1, answered_by="U1", now=time.time())
    assert not claim.won and claim.record is None


@pytest.mark.parametrize("status", ["expired", "superseded", "cancelled"])
async def test_close_moves_a_pending_interaction_once(store: Store, status: str) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    now = time.time()
    closed = await store.close_interaction("ix-1", status=status, now=now)  # type: ignore[arg-type]
    assert closed.won and closed.record is not None
    assert (closed.record.status, closed.record.answered_at) == (status, now)

    again = await store.close_interaction("ix-1", status="cancelled", now=now + 1)
    assert not again.won and again.record == closed.record
    late = await answer_only(store, "ix-1", answer=1, answered_by="U1", now=now)
    assert not late.won and late.record == closed.record


async def test_close_of_an_answered_interaction_is_lost(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    now = time.time()
    await answer_only(store, "ix-1", answer="a", answered_by="U1", now=now)
    closed = await store.close_interaction("ix-1", status="expired", now=now)
    assert not closed.won and closed.record is not None and closed.record.status == "answered"


async def test_close_of_a_missing_interaction_is_lost(store: Store) -> None:
    claim = await store.close_interaction("nope", status="expired", now=time.time())
    assert not claim.won and claim.record is None


@pytest.mark.parametrize("status", ["pending", "answered"])
async def test_close_refuses_a_status_that_is_not_a_closing_one(store: Store, status: str) -> None:
    await store.add_interactions([make_interaction("ix-1")])
    with pytest.raises(ValueError, match=status):
        await store.close_interaction("ix-1", status=status, now=time.time())  # type: ignore[arg-type]


async def test_due_interactions_are_pending_expired_oldest_first_and_limited(store: Store) -> None:
    now = time.time()
    await store.add_interactions(
        [
            make_interaction("late", expires_at=now - 10),
            make_interaction("oldest", expires_at=now - 300),
            make_interaction("future", expires_at=now + 300),
            make_interaction("middle", expires_at=now - 100),
            make_interaction("answered", expires_at=now + 1),
            make_interaction("closed", expires_at=now - 200),
            make_interaction("edge", expires_at=now),
        ]
    )
    await answer_only(store, "answered", answer=1, answered_by="U1", now=now)
    await store.close_interaction("closed", status="superseded", now=now)

    due = await store.due_interactions(now + 2)
    assert [r.interaction_id for r in due] == ["oldest", "middle", "late", "edge"]
    assert all(r.status == "pending" for r in due)
    limited = await store.due_interactions(now + 2, limit=2)
    assert [r.interaction_id for r in limited] == ["oldest", "middle"]
    assert await store.due_interactions(now + 2, limit=0) == []
    assert [r.interaction_id for r in await store.due_interactions(now - 50)] == [
        "oldest",
        "middle",
    ]

    await store.close_interaction("oldest", status="expired", now=now)
    assert [r.interaction_id for r in await store.due_interactions(now + 2, limit=1)] == ["middle"]


async def test_a_corrupt_interaction_raises_an_error_naming_its_key(
    store: Store, store_url: str
) -> None:
    await store.add_interactions([make_interaction("ix-1"), make_interaction("ix-2")])
    key = await overwrite_raw(store, store_url, "interactions", "ix-1", "[1, 2")
    with pytest.raises(CorruptRecordError) as caught:
        await store.get_interaction("ix-1")
    assert caught.value.key == key and f"`{key}`" in str(caught.value)
    with pytest.raises(CorruptRecordError, match="ix-1"):
        await store.run_interactions("run-1")
    with pytest.raises(CorruptRecordError, match="ix-1"):
        await answer_only(store, "ix-1", answer=1, answered_by="U1", now=time.time())
    await overwrite_raw(store, store_url, "interactions", "ix-2", '"just a string"')
    with pytest.raises(CorruptRecordError, match="not a JSON object"):
        await store.get_interaction("ix-2")


async def test_pending_count_counts_what_waits_for_an_answer(store: Store) -> None:
    assert await store.pending_count() == 0
    await store.add_interactions([make_interaction(f"ix-{n}") for n in range(3)])
    assert await store.pending_count() == 3
    claim = await answer_only(store, "ix-0", answer="x", answered_by="U1", now=time.time())
    assert claim.won
    closed = await store.close_interaction("ix-1", status="superseded", now=time.time())
    assert closed.won
    assert await store.pending_count() == 1
