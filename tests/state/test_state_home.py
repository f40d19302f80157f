"""What App Home reads from the store, against SQLite and Redis alike: the pending interactions
(soonest to expire first) and who opened Home lately."""

from __future__ import annotations

import asyncio
import time

from state import Store

from ..conftest import answer_only
from .conftest import make_interaction


async def test_pending_interactions_lists_only_pending_soonest_first(store: Store) -> None:
    now = time.time()
    await store.add_interactions(
        [
            make_interaction("ix-late", run_id="r1", expires_at=now + 300),
            make_interaction("ix-soon", run_id="r2", expires_at=now + 100),
            make_interaction("ix-answered", run_id="r3", expires_at=now + 200),
            make_interaction("ix-closed", run_id="r4", expires_at=now + 50),
        ]
    )
    assert (await answer_only(store, "ix-answered", answer=1, answered_by="U1", now=now)).won
    await store.close_interaction("ix-closed", status="cancelled", now=now)

    listed = await store.pending_interactions()

    assert [record.interaction_id for record in listed] == ["ix-soon", "ix-late"]
    assert all(record.status == "pending" for record in listed)
    assert listed[0] == await store.get_interaction("ix-soon")


async def test_pending_interactions_respects_the_limit(store: Store) -> None:
    now = time.time()
    await store.add_interactions(
        [make_interaction(f"ix-{n}", run_id=f"r{n}", expires_at=now + 10 + n) for n in range(5)]
    )
    listed = await store.pending_interactions(limit=3)
    assert [record.interaction_id for record in listed] == ["ix-0", "ix-1", "ix-2"]
    assert await store.pending_interactions(limit=0) == []


async def test_pending_interactions_of_an_empty_store_is_empty(store: Store) -> None:
    assert await store.pending_interactions() == []


async def test_home_viewers_are_the_live_marks_newest_first(store: Store) -> None:
    assert await store.home_viewers() == []
    await store.mark_home_opened("U1", ttl=60)
    await store.mark_home_opened("U2", ttl=120)
    await store.mark_home_opened("U1", ttl=30)  # marked again: one entry, the new mark counts
    assert await store.home_viewers() == ["U2", "U1"]
    assert await store.home_viewers(limit=1) == ["U2"]


async def test_a_home_mark_runs_out(store: Store) -> None:
    await store.mark_home_opened("U1", ttl=0.2)
    await store.mark_home_opened("U2", ttl=60)
    await asyncio.sleep(0.3)
    assert await store.home_viewers() == ["U2"]
