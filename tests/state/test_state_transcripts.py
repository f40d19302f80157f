"""Layout 2: a conversation's transcript is stored once, in an append-only log, and each run
record says where its transcript ends there. The same contract on SQLite, Redis and a Redis
Cluster."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from state import RedisStore, RunRecord, SQLiteStore, Store, open_store

from .conftest import make_run, raw_client, raw_sqlite, redis_keys


def message(n: int, role: str = "user") -> dict[str, Any]:
    return {"role": role, "content": f'message {n} ✓ "quoted"\nnew line'}


def appended(run_id: str, transcript: list[dict[str, Any]], **fields: Any) -> RunRecord:
    values: dict[str, Any] = {"layout": 2, "transcript_id": "root", "root_id": "root"}
    values.update(fields)
    return make_run(run_id, transcript=list(transcript), **values)


def child_of(parent: RunRecord, run_id: str, *new: dict[str, Any], **fields: Any) -> RunRecord:
    return appended(
        run_id,
        [*parent.transcript, *new],
        parent_id=parent.run_id,
        transcript_id=parent.transcript_id,
        base=len(parent.transcript),
        **fields,
    )


async def logged(store: Store, url: str) -> list[str]:
    """Every message the store's transcript logs hold, as stored (one entry per copy)."""
    if isinstance(store, SQLiteStore):
        with raw_sqlite(url) as conn:
            rows = conn.execute("SELECT messages FROM transcripts ORDER BY log, pos").fetchall()
        conn.close()
        return [m for (chunk,) in rows for m in chunk.split("\n")]
    assert isinstance(store, RedisStore)
    client = raw_client(url)
    try:
        fields = await client.hgetall(redis_keys(store).transcripts)
    finally:
        await client.aclose()
    chunks = {k.decode(): v.decode() for k, v in fields.items()}
    return [
        m
        for name, chunk in sorted(chunks.items())
        if ":" in name and not name.startswith(("log:", "@", "#"))
        for m in chunk.split("\n")
    ]


async def test_a_layout_2_run_round_trips(store: Store) -> None:
    run = appended(
        "run-1",
        [message(0, "system"), message(1), {"role": "assistant", "content": "sure"}],
        status="success",
        reason=None,
        input=message(1)["content"],
        output="sure",
        t0=1_700_000_000_000,
        t1=1_700_000_000_250,
        usage={"input_tokens": 3},
    )
    await store.save_run(run)
    assert await store.load_run("run-1") == run


@pytest.mark.parametrize(
    ("given", "output"),
    [(None, None), ("other", "different text"), ({"a": [1]}, ["x"]), ("", "sure")],
)
async def test_input_and_output_that_are_not_the_messages_text_are_kept(
    store: Store, given: Any, output: Any
) -> None:
    run = appended(
        "run-1",
        [message(1), {"role": "assistant", "content": "sure"}],
        status="success",
        input=given,
        output=output,
    )
    await store.save_run(run)
    assert await store.load_run("run-1") == run


async def test_each_message_of_a_thread_is_stored_once(store: Store, store_url: str) -> None:
    first = appended("run-1", [message(0), message(1, "assistant")], status="success")
    await store.save_run(first)
    runs = [first]
    for n in range(2, 12, 2):
        runs.append(child_of(runs[-1], f"run-{n}", message(n), message(n + 1, "assistant")))
        await store.save_run(runs[-1])
    assert len(await logged(store, store_url)) == 12
    for run in runs:
        loaded = await store.load_run(run.run_id)
        assert loaded is not None and loaded.transcript == run.transcript
        assert (loaded.base, loaded.layout, loaded.transcript_id) == (run.base, 2, "root")


async def test_saving_again_appends_only_the_new_messages(store: Store, store_url: str) -> None:
    """The tool journal saves a run several times as it goes; a retry saves it again."""
    run = appended("run-1", [message(0)], status="running")
    for n in range(1, 5):
        await store.save_run(run)
        await store.save_run(run)
        run.transcript.append(message(n, "tool"))
    await store.save_run(run)
    assert len(await logged(store, store_url)) == 5
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.transcript == run.transcript


async def test_a_parent_keeps_its_transcript_when_its_child_appends(store: Store) -> None:
    parent = appended("run-1", [message(0), message(1, "assistant")])
    await store.save_run(parent)
    child = child_of(parent, "run-2", message(2, "tool"), message(3, "assistant"))
    await store.save_run(child)
    # A stale copy of the parent saved after its child (the stop of a cancelled save, a retry).
    await store.save_run(parent)
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.transcript == parent.transcript
    loaded_child = await store.load_run("run-2")
    assert loaded_child is not None and loaded_child.transcript == child.transcript


async def test_a_second_child_of_one_parent_is_stored_inline(store: Store, store_url: str) -> None:
    """Two runs continued from one parent: the first appends after the parent's end; the
    second finds other messages there and keeps its transcript in its record instead, so
    neither the parent's nor the first child's transcript changes."""
    parent = appended("run-1", [message(0), message(1, "assistant")], status="success")
    await store.save_run(parent)
    one = child_of(parent, "run-2", message(2), message(3, "assistant"))
    two = child_of(parent, "run-3", message(20), message(21, "assistant"))
    await store.save_run(one)
    await store.save_run(two)
    assert (one.layout, two.layout, two.transcript_id, two.base) == (2, 1, None, 0)
    for run in (parent, one, two):
        loaded = await store.load_run(run.run_id)
        assert loaded is not None and loaded.transcript == run.transcript
    assert len(await logged(store, store_url)) == 4
    # The inline child's own child starts a log of its own, and appends to it from then on.
    grandchild = appended(
        "run-4", [*two.transcript, message(22)], parent_id="run-3", transcript_id="run-4"
    )
    await store.save_run(grandchild)
    assert grandchild.layout == 2
    loaded = await store.load_run("run-4")
    assert loaded is not None and loaded.transcript == grandchild.transcript


async def test_racing_children_append_at_most_once(store: Store, store_url: str) -> None:
    parent = appended("run-1", [message(0), message(1, "assistant")], status="success")
    await store.save_run(parent)
    children = [
        child_of(parent, f"child-{n}", message(2), message(n, "assistant")) for n in range(8)
    ]
    await asyncio.gather(*(store.save_run(child) for child in children))
    assert sum(child.layout == 2 for child in children) == 1
    assert len(await logged(store, store_url)) == 4
    for child in children:
        loaded = await store.load_run(child.run_id)
        assert loaded is not None and loaded.transcript == child.transcript


async def test_identical_retries_of_one_child_append_once(store: Store, store_url: str) -> None:
    parent = appended("run-1", [message(0)], status="success")
    await store.save_run(parent)
    attempts = [child_of(parent, "run-2", message(1), message(2, "assistant")) for _ in range(5)]
    await asyncio.gather(*(store.save_run(attempt) for attempt in attempts))
    assert all(attempt.layout == 2 for attempt in attempts)
    assert len(await logged(store, store_url)) == 3


async def test_a_claimed_run_comes_without_its_transcript_and_cannot_be_saved(
    store: Store,
) -> None:
    run = appended("run-1", [message(0), message(1, "assistant")], input="go")
    await store.save_run(run)
    claim = await store.claim_run("run-1", child_id="child")
    assert claim.won and claim.run is not None
    assert claim.run.resumed_by == "child" and claim.run.status == "paused"
    assert not claim.run.transcript_read and claim.run.input == "go"
    with pytest.raises(ValueError, match="without its transcript"):
        await store.save_run(claim.run)
    loaded = await store.load_run("run-1")
    assert loaded is not None and loaded.transcript == run.transcript
    assert loaded.resumed_by == "child" and loaded.transcript_read


async def test_a_run_that_cannot_be_stored_is_refused_before_any_write(store: Store) -> None:
    with pytest.raises(ValueError, match="base"):
        await store.save_run(appended("run-1", [message(0)], base=2))
    with pytest.raises(ValueError, match="transcript log"):
        await store.save_run(appended("run-1", [message(0)], transcript_id=None))
    assert await store.load_run("run-1") is None


async def test_a_layout_1_parent_and_its_layout_2_child(store: Store, store_url: str) -> None:
    """Records written before layout 2 keep their transcript inline; a child copies it once into
    a log named by the child, and the thread appends from there."""
    legacy = make_run("old", transcript=[message(0), message(1, "assistant")], status="success")
    await store.save_run(legacy)
    child = appended(
        "new", [*legacy.transcript, message(2)], parent_id="old", transcript_id="new", root_id="old"
    )
    await store.save_run(child)
    loaded = await store.load_run("new")
    assert loaded == child
    assert (await store.load_run("old")) == legacy
    assert len(await logged(store, store_url)) == 3


async def test_the_log_outlives_every_run_in_it(store: Store, store_url: str) -> None:
    """A log is kept as long as the last-saved run that uses it, so it never goes before one
    of its runs."""
    run = appended("run-1", [message(0)])
    await store.save_run(run)
    later = child_of(run, "run-2", message(1))
    await store.save_run(later)
    if isinstance(store, SQLiteStore):
        with raw_sqlite(store_url) as conn:
            runs = max(k for (k,) in conn.execute("SELECT keep_until FROM runs"))
            (log,) = conn.execute("SELECT keep_until FROM transcript_logs").fetchone()
        conn.close()
        assert log >= runs
        return
    assert isinstance(store, RedisStore)
    keys = redis_keys(store)
    client = raw_client(store_url)
    try:
        ttl = max([await client.ttl(keys.run("run-1")), await client.ttl(keys.run("run-2"))])
        ((_, keep),) = await client.zrange(keys.transcripts_keep, 0, -1, withscores=True)
    finally:
        await client.aclose()
    assert keep >= time.time() + ttl - 2


async def test_expired_logs_are_deleted(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.save_run(appended("run-1", [message(0), message(1)], transcript_id="gone"))
        kept = appended("run-2", [message(2)], transcript_id="kept")
        await store.save_run(kept)
        if isinstance(store, RedisStore):
            keys = redis_keys(store)
            client = raw_client(store_url)
            try:
                number = await client.hget(keys.transcripts, "log:gone")
                await client.zadd(keys.transcripts_keep, {number: 1})
                await client.delete(keys.run("run-1"))  # its run expired, as its TTL says
            finally:
                await client.aclose()
            # Any save deletes a few logs found expired.
            await store.save_run(child_of(kept, "run-3", message(3)))
        else:
            with raw_sqlite(store_url) as conn:
                conn.execute("UPDATE transcript_logs SET keep_until = 1 WHERE name = 'gone'")
                conn.execute("UPDATE runs SET keep_until = 1 WHERE run_id = 'run-1'")
            conn.close()
    # SQLite prunes when the store is opened (and from the periodic sweep).
    async with open_store(store_url) as store:
        left = [message(2), message(3)] if isinstance(store, RedisStore) else [message(2)]
        assert sorted(await logged(store, store_url)) == sorted(m.decode() for m in _json(*left))
        loaded = await store.load_run("run-2")
        assert loaded is not None and loaded.transcript == [message(2)]


def _json(*messages: dict[str, Any]) -> list[bytes]:
    import pydantic_core

    return [pydantic_core.to_json(m) for m in messages]
