"""`settled_runs`: the runs that wait for nothing but were never resumed, for startup recovery."""

from __future__ import annotations

import asyncio
import time

import pytest

from state import Store

from ..conftest import answer_only
from .conftest import make_interaction, make_run


async def _paused_run(store: Store, run_id: str, *interaction_ids: str) -> None:
    await store.save_run(make_run(run_id))
    await store.add_interactions([make_interaction(ix, run_id=run_id) for ix in interaction_ids])


async def _answer(store: Store, interaction_id: str) -> None:
    claim = await answer_only(store, interaction_id, answer=True, answered_by="U1", now=time.time())
    assert claim.won


async def test_an_empty_store_has_none(store: Store) -> None:
    assert await store.settled_runs() == []


async def test_a_run_is_settled_once_its_only_interaction_is_answered(store: Store) -> None:
    await _paused_run(store, "run-1", "ix-1")
    assert await store.settled_runs() == []
    await _answer(store, "ix-1")
    assert await store.settled_runs() == ["run-1"]


async def test_a_claim_takes_the_run_off_the_list(store: Store) -> None:
    await _paused_run(store, "run-1", "ix-1")
    await _answer(store, "ix-1")
    assert (await store.claim_run("run-1", child_id="child")).won
    assert await store.settled_runs() == []


async def test_a_run_still_waiting_for_one_of_its_cards_is_not_settled(store: Store) -> None:
    await _paused_run(store, "run-1", "ix-1", "ix-2")
    await _answer(store, "ix-1")
    assert await store.settled_runs() == []
    await _answer(store, "ix-2")
    assert await store.settled_runs() == ["run-1"]


@pytest.mark.parametrize("status", ["expired", "cancelled", "superseded"])
async def test_a_closed_interaction_settles_its_run_too(store: Store, status: str) -> None:
    """An expiry that crashed before cancelling the run leaves it just as stuck as an answer."""
    await _paused_run(store, "run-1", "ix-1", "ix-2")
    await _answer(store, "ix-1")
    closed = await store.close_interaction("ix-2", status=status, now=time.time())  # type: ignore[arg-type]
    assert closed.won
    assert await store.settled_runs() == ["run-1"]


async def test_a_run_that_is_not_paused_is_not_settled(store: Store) -> None:
    await _paused_run(store, "run-1", "ix-1")
    await _answer(store, "ix-1")
    await store.save_run(make_run("run-1", status="success", reason=None))
    assert await store.settled_runs() == []


async def test_answered_interactions_without_a_run_record_are_not_listed(store: Store) -> None:
    await store.add_interactions([make_interaction("ix-1", run_id="no-such-run")])
    await _answer(store, "ix-1")
    assert await store.settled_runs() == []


async def test_a_run_whose_interactions_are_all_pending_is_not_listed(store: Store) -> None:
    await _paused_run(store, "run-1", "ix-1")
    await _paused_run(store, "run-2", "ix-2")
    await _answer(store, "ix-2")
    assert await store.settled_runs() == ["run-2"]


async def test_only_the_runs_own_interactions_count(store: Store) -> None:
    """An id re-added by a child run belongs to the child, as `run_interactions` says."""
    await _paused_run(store, "run-1", "ix-1", "ix-2")
    await _answer(store, "ix-1")
    await _paused_run(store, "run-child", "ix-2")
    assert [r.interaction_id for r in await store.run_interactions("run-1")] == ["ix-1"]
    assert await store.settled_runs() == ["run-1"]
    await _answer(store, "ix-2")
    assert await store.settled_runs() == ["run-1", "run-child"]


async def test_runs_come_in_id_order_a_page_at_a_time(store: Store) -> None:
    run_ids = ["run-c", "run-a", "run-e", "run-b", "run-d"]
    for n, run_id in enumerate(run_ids):
        await _paused_run(store, run_id, f"ix-{n}")
        await _answer(store, f"ix-{n}")

    assert await store.settled_runs() == sorted(run_ids)
    assert await store.settled_runs(limit=2) == ["run-a", "run-b"]
    assert await store.settled_runs(limit=2, after="run-b") == ["run-c", "run-d"]
    assert await store.settled_runs(limit=2, after="run-d") == ["run-e"]
    assert await store.settled_runs(after="run-e") == []
    assert await store.settled_runs(after="run-bb") == ["run-c", "run-d", "run-e"]
    assert await store.settled_runs(limit=0) == []


async def test_pages_skip_runs_that_are_not_settled(store: Store) -> None:
    for n in range(6):
        await _paused_run(store, f"run-{n}", f"ix-{n}", f"other-{n}")
        await _answer(store, f"ix-{n}")
        if n % 2:
            await _answer(store, f"other-{n}")
    assert await store.settled_runs(limit=2) == ["run-1", "run-3"]
    assert await store.settled_runs(limit=2, after="run-3") == ["run-5"]


async def test_the_last_two_answers_at_once_settle_the_run_once(store: Store) -> None:
    await _paused_run(store, "run-1", *(f"ix-{n}" for n in range(10)))
    await asyncio.gather(*(_answer(store, f"ix-{n}") for n in range(10)))
    assert await store.settled_runs() == ["run-1"]


async def test_a_second_store_on_the_same_data_sees_settled_runs(
    store: Store, store_url: str
) -> None:
    from state import open_store

    await _paused_run(store, "run-1", "ix-1")
    await _answer(store, "ix-1")
    async with open_store(store_url) as other:
        assert await other.settled_runs() == ["run-1"]
        assert (await other.claim_run("run-1", child_id="child")).won
    assert await store.settled_runs() == []
