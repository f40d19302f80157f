"""The run half of the store contract, against SQLite and Redis alike."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from state import CorruptRecordError, PendingCall, PendingInteraction, RunRecord, StopGuard, Store

from ..conftest import answer_only
from .conftest import make_interaction, make_run, overwrite_raw, read_raw


def full_run() -> RunRecord:
    return make_run(
        "run-ü-1",
        parent_id="run-0",
        agent_name="ops-ágent ✓",
        status="paused",
        reason="input_required",
        input={"prompt": "restart the 数据库", "flags": [True, None, 1.5, -2]},
        output=None,
        error=None,
        transcript=[
            {"role": "system", "content": "You are ops."},
            {"role": "user", "content": 'héllo 👋 "quoted" \\ back\nslash'},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "ask_user", "arguments": '{"q": "ok?"}'},
                    }
                ],
            },
        ],
        pending_calls=[PendingCall(tool_call_id="call_1", name="ask_user", arguments="{}")],
        interactions=[
            PendingInteraction(
                interaction_id="ix-1",
                kind="ask_user",
                payload={"question": "ok?", "options": [], "nested": {"a": [{"b": None}]}},
                response_schema={"type": "string", "enum": ["yes", "no"]},
                tool_call_id="call_1",
                runnable_path="ops.ask_user",
                runnable_name="ask_user",
                runnable_type="tool",
                t0=1_700_000_000_123,
            )
        ],
        answers={"ix-0": {"approved": True, "reason": "fine"}, "ix-00": [1, 2, 3]},
        usage={"input_tokens": 12, "output_tokens": 34},
        t0=1_700_000_000_000,
        t1=None,
        resumed_by=None,
        channel="C0DEPLOYS",
    )


async def test_save_then_load_returns_every_field(store: Store) -> None:
    run = full_run()
    await store.save_run(run)
    assert await store.load_run("run-ü-1") == run


async def test_empty_collections_and_finished_runs_round_trip(store: Store) -> None:
    run = make_run(
        "run-2", status="error", reason=None, error="boom", output=[], t1=5, resumed_by="run-9"
    )
    await store.save_run(run)
    assert await store.load_run("run-2") == run


async def test_load_of_a_missing_run_is_none(store: Store) -> None:
    assert await store.load_run("nope") is None


async def test_save_replaces_the_run(store: Store) -> None:
    await store.save_run(make_run(status="paused"))
    await store.save_run(make_run(status="success", reason=None, output="done", t1=9))
    loaded = await store.load_run("run-1")
    assert loaded is not None
    assert (loaded.status, loaded.output, loaded.t1) == ("success", "done", 9)


async def test_claim_is_won_once_and_the_loser_sees_the_winner(store: Store) -> None:
    await store.save_run(make_run())
    first = await store.claim_run("run-1", child_id="child-a")
    second = await store.claim_run("run-1", child_id="child-b")

    assert first.won
    assert first.run is not None and first.run.resumed_by == "child-a"
    assert not second.won
    assert second.run is not None and second.run.resumed_by == "child-a"
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.resumed_by == "child-a"


async def test_the_child_holding_a_claim_wins_it_again(store: Store) -> None:
    """A retried work item derives the same child id and must carry on with its resume."""
    await store.save_run(make_run())
    first = await store.claim_run("run-1", child_id="child-a")
    again = await store.claim_run("run-1", child_id="child-a")
    other = await store.claim_run("run-1", child_id="child-b")

    assert first.won and again.won
    assert again.run is not None and again.run.resumed_by == "child-a"
    assert not other.won
    assert other.run is not None and other.run.resumed_by == "child-a"
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.resumed_by == "child-a"


async def test_the_same_child_loses_a_run_that_is_no_longer_paused(store: Store) -> None:
    await store.save_run(make_run())
    assert (await store.claim_run("run-1", child_id="child-a")).won
    await store.save_run(make_run(status="cancelled", reason=None))
    claim = await store.claim_run("run-1", child_id="child-a")
    assert not claim.won
    assert claim.run is not None and claim.run.resumed_by == "child-a"


async def test_claim_returns_the_stored_run(store: Store) -> None:
    run = full_run()
    await store.save_run(run)
    claim = await store.claim_run("run-ü-1", child_id="child")
    run.resumed_by = "child"
    assert claim.won and claim.run == run


@pytest.mark.parametrize("status", ["success", "error", "cancelled"])
async def test_claim_of_a_run_that_is_not_paused_is_lost(store: Store, status: str) -> None:
    await store.save_run(make_run(status=status, reason=None))
    claim = await store.claim_run("run-1", child_id="child")
    assert not claim.won
    assert claim.run is not None and claim.run.status == status
    assert claim.run.resumed_by is None


async def test_claim_of_a_missing_run_is_lost_without_a_run(store: Store) -> None:
    claim = await store.claim_run("nope", child_id="child")
    assert not claim.won and claim.run is None


async def test_claim_needs_a_child_id(store: Store) -> None:
    await store.save_run(make_run())
    with pytest.raises(ValueError, match="child_id"):
        await store.claim_run("run-1", child_id="")


async def test_a_later_save_never_clears_a_claim(store: Store) -> None:
    """A stale copy saved after the claim must not make the run resumable a second time."""
    await store.save_run(make_run())
    assert (await store.claim_run("run-1", child_id="child-a")).won
    await store.save_run(make_run(transcript=[{"role": "user", "content": "stale"}]))

    loaded = await store.load_run("run-1")
    assert loaded is not None
    assert loaded.resumed_by == "child-a"
    assert loaded.transcript == [{"role": "user", "content": "stale"}]
    assert not (await store.claim_run("run-1", child_id="child-b")).won


async def test_twenty_concurrent_claims_have_exactly_one_winner(store: Store) -> None:
    await store.save_run(make_run())
    claims = await asyncio.gather(
        *(store.claim_run("run-1", child_id=f"child-{n}") for n in range(20))
    )
    winners = [n for n, claim in enumerate(claims) if claim.won]
    assert len(winners) == 1
    winner = f"child-{winners[0]}"
    assert all(claim.run is not None and claim.run.resumed_by == winner for claim in claims)


async def test_a_run_saved_before_runs_kept_their_channel_reads_with_none(
    store: Store, store_url: str
) -> None:
    # Today's record with its channel taken out is what the code before channels wrote.
    await store.save_run(make_run(channel="C0DEPLOYS"))
    written = json.loads(await read_raw(store, store_url, "run-1", "runs"))
    assert written.pop("channel") == "C0DEPLOYS"
    await overwrite_raw(store, store_url, "runs", "run-1", json.dumps(written))
    loaded = await store.load_run("run-1")
    assert loaded == make_run() and loaded.channel is None


async def test_a_corrupt_run_raises_an_error_naming_its_key(store: Store, store_url: str) -> None:
    await store.save_run(make_run())
    key = await overwrite_raw(store, store_url, "runs", "run-1", '{"run_id": "run-1", "st')
    with pytest.raises(CorruptRecordError, match="run") as caught:
        await store.load_run("run-1")
    assert caught.value.key == key
    assert f"`{key}`" in str(caught.value)
    with pytest.raises(CorruptRecordError):
        await store.claim_run("run-1", child_id="child")


async def test_valid_json_of_the_wrong_shape_is_corrupt_too(store: Store, store_url: str) -> None:
    await store.save_run(make_run())
    await overwrite_raw(store, store_url, "runs", "run-1", '{"run_id": "run-1", "status": 7}')
    with pytest.raises(CorruptRecordError):
        await store.load_run("run-1")
    await store.save_run(make_run("other"))
    other = await read_raw(store, store_url, "other", "runs")
    await overwrite_raw(store, store_url, "runs", "run-1", other)
    with pytest.raises(CorruptRecordError, match="'other'"):
        await store.load_run("run-1")


LAYOUT_2 = {
    "layout": 2,
    "transcript_id": "run-1",
    "transcript": [{"role": "user", "content": "go"}],
}


@pytest.mark.parametrize("layout", [{}, LAYOUT_2], ids=["layout-1", "layout-2"])
async def test_a_reading_claim_returns_the_whole_run_to_winner_and_loser(
    store: Store, layout: dict[str, object]
) -> None:
    await store.save_run(make_run(**layout))
    loaded = await store.load_run("run-1")
    won = await store.claim_run("run-1", child_id="child-a", read=True)
    lost = await store.claim_run("run-1", child_id="child-b", read=True)

    assert loaded is not None and loaded.transcript == layout.get("transcript", [])
    loaded.resumed_by = "child-a"
    assert won.won and won.run == loaded and won.stopped is None
    assert not lost.won and lost.run == loaded
    again = await store.claim_run("run-1", child_id="child-a", read=True)
    assert again.won and again.run == loaded


async def test_a_reading_claim_of_a_missing_or_ended_run_is_lost(store: Store) -> None:
    missing = await store.claim_run("nope", child_id="child", read=True)
    assert not missing.won and missing.run is None
    await store.save_run(make_run(status="success", reason=None))
    ended = await store.claim_run("run-1", child_id="child", read=True)
    assert not ended.won and ended.run is not None and ended.run.status == "success"
    assert ended.run.resumed_by is None


async def test_a_reading_claim_takes_no_stop_guard_of_the_callers(store: Store) -> None:
    await store.save_run(make_run())
    guard = StopGuard(run_id="run-1", channel="C1", thread_ts="1.1")
    with pytest.raises(ValueError, match="stop"):
        await store.claim_run("run-1", child_id="child", stop=guard, read=True)


async def test_a_corrupt_run_is_not_claimed_by_a_reading_claim(
    store: Store, store_url: str
) -> None:
    await store.save_run(make_run())
    good = await read_raw(store, store_url, "run-1", "runs")
    await overwrite_raw(store, store_url, "runs", "run-1", '{"run_id": "run-1", "st')
    with pytest.raises(CorruptRecordError):
        await store.claim_run("run-1", child_id="child", read=True)
    await overwrite_raw(store, store_url, "runs", "run-1", good)
    # Nothing was left claimed: another child wins it once it reads again.
    assert (await store.claim_run("run-1", child_id="other", read=True)).won


async def test_a_released_claim_leaves_the_run_as_it_was_before(store: Store) -> None:
    await store.save_run(make_run())
    assert (await store.claim_run("run-1", child_id="child-a", read=True)).won
    assert not await store.release_run("run-1", child_id="child-b")
    assert await store.release_run("run-1", child_id="child-a")
    assert not await store.release_run("run-1", child_id="child-a")  # nothing held any more
    assert await store.load_run("run-1") == make_run()
    assert (await store.claim_run("run-1", child_id="child-b")).won


async def test_a_claim_on_a_run_no_longer_paused_is_not_released(store: Store) -> None:
    await store.save_run(make_run())
    assert (await store.claim_run("run-1", child_id="child-a")).won
    await store.save_run(make_run(status="success", reason=None))
    assert not await store.release_run("run-1", child_id="child-a")
    assert not await store.release_run("nope", child_id="child-a")
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.resumed_by == "child-a"


async def test_a_released_run_is_listed_as_settled_again(store: Store) -> None:
    """Recovery resumes settled runs nobody resumed: a claim given back must not hide one."""
    await store.save_run(make_run())
    await store.add_interactions([make_interaction("ix-1", "run-1")])
    await answer_only(store, "ix-1", answer="postgres", answered_by="U1", now=time.time())
    assert await store.settled_runs() == ["run-1"]
    assert (await store.claim_run("run-1", child_id="child-a", read=True)).won
    assert await store.settled_runs() == []
    assert await store.release_run("run-1", child_id="child-a")
    assert await store.settled_runs() == ["run-1"]
