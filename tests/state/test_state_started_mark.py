"""`save_run(then=...)`, the journal's "started" mark: `then` is called once the record is
durable and before the save returns, never for a write the stop guard refused; on SQLite the
commit is made on the event loop's thread, so not even a turn of the loop comes between it and
`then`, and a file locked by another writer is waited for without blocking the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from state import SQLiteStore, StopGuard, Store, ThreadStop, open_store

from .conftest import make_run

CHANNEL, THREAD = "C1", "1700000000.000100"
GUARD = StopGuard(run_id="run-1", channel=CHANNEL, thread_ts=THREAD)
STOP = ThreadStop(user="U0REQ", at=1700000001.5, event_id="Ev-stop")
LAYOUTS: dict[str, dict[str, Any]] = {
    "layout-1": {},
    "layout-2": {
        "layout": 2,
        "transcript_id": "run-1",
        "transcript": [{"role": "user", "content": "go"}],
    },
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
async def test_then_comes_after_the_record_is_durable_and_before_the_save_returns(
    store: Store, store_url: str, layout: str
) -> None:
    seen: list[str] = []
    run = make_run("run-1", status="running", thread=(CHANNEL, THREAD), **LAYOUTS[layout])
    async with open_store(store_url) as other:

        def then() -> None:
            seen.append("then")

        saved = await store.save_run(run, stop=GUARD, then=then)
        seen.append("returned")
        stored = await other.load_run("run-1")
    assert saved and seen == ["then", "returned"]
    assert stored is not None and stored.status == "running"


async def test_then_is_not_called_when_the_stop_guard_refuses_the_write(store: Store) -> None:
    await store.stop_thread(CHANNEL, THREAD, STOP)
    called: list[str] = []
    run = make_run("run-1", status="running", thread=(CHANNEL, THREAD))
    assert not await store.save_run(run, stop=GUARD, then=lambda: called.append("then"))
    assert called == [] and await store.load_run("run-1") is None


async def test_on_sqlite_then_runs_with_no_turn_of_the_loop_since_the_save_was_asked(
    tmp_path: Path,
) -> None:
    loop = asyncio.get_running_loop()
    turns = [0]
    at_then: list[int] = []

    def tick() -> None:
        turns[0] += 1
        if not at_then:
            loop.call_soon(tick)

    async with SQLiteStore(tmp_path / "h.db") as store:
        loop.call_soon(tick)
        await asyncio.sleep(0)
        asked = turns[0]
        run = make_run("run-1", status="running", thread=(CHANNEL, THREAD))
        await store.save_run(run, stop=GUARD, then=lambda: at_then.append(turns[0]))
    assert at_then == [asked]


async def test_on_sqlite_a_mark_waits_for_another_writers_lock_and_the_loop_keeps_turning(
    tmp_path: Path,
) -> None:
    path = tmp_path / "h.db"
    called: list[str] = []
    async with SQLiteStore(path) as store:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        run = make_run("run-1", status="running", thread=(CHANNEL, THREAD))
        save = asyncio.create_task(store.save_run(run, then=lambda: called.append("then")))
        for _ in range(50):
            await asyncio.sleep(0)  # the loop turns while the mark waits
        assert not save.done() and called == []
        holder.execute("COMMIT")
        holder.close()
        assert await save and called == ["then"]
        assert await store.load_run("run-1") is not None
