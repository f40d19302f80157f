"""What `add_interactions` returns, and what a re-added pending record keeps: the store's half
of a pause (the Slack app posts cards from this answer, with no read of its own), on every store
(SQLite, Redis, Redis Cluster)."""

from __future__ import annotations

import time

from state import Approval, InteractionRecord, Store

from ..conftest import answer_only
from .conftest import make_interaction, overwrite_raw

T0 = 1_900_000_000.123_456_7
"""A created_at with every digit a double holds, so a store that rounds it shows."""


async def test_new_ids_come_back_as_given_in_order(store: Store) -> None:
    records = [make_interaction("ix-b"), make_interaction("ix-a", reminded_at=T0)]
    stored = await store.add_interactions(records)
    assert [r.interaction_id for r in stored] == ["ix-b", "ix-a"]
    assert stored[0] == records[0] == await store.get_interaction("ix-b")
    # A nudge mark is the store's to set, never the writer's.
    assert stored[1].reminded_at is None
    assert stored[1] == await store.get_interaction("ix-a")
    assert await store.add_interactions([]) == []


async def test_a_re_added_pending_id_keeps_its_card_and_times(store: Store) -> None:
    expires_at = time.time() + 3600.987_654_3
    await store.add_interactions(
        [make_interaction("ix-1", payload={"v": 1}, created_at=T0, expires_at=expires_at)]
    )
    await store.set_message("ix-1", channel="C1", message_ts="1700000009.000900")

    later = make_interaction(
        "ix-1", "run-child", payload={"v": 2}, created_at=T0 + 50, expires_at=expires_at + 50
    )
    [moved] = await store.add_interactions([later])
    assert (moved.run_id, moved.payload, moved.status) == ("run-child", {"v": 2}, "pending")
    assert (moved.message_ts, moved.created_at, moved.expires_at) == (
        "1700000009.000900",
        T0,
        expires_at,
    )
    assert moved == await store.get_interaction("ix-1")

    # Paused again once more: the ts now lives in the record itself, and still carries over.
    [again] = await store.add_interactions([make_interaction("ix-1", "run-grandchild")])
    assert (again.run_id, again.message_ts, again.created_at, again.expires_at) == (
        "run-grandchild",
        "1700000009.000900",
        T0,
        expires_at,
    )
    assert again == await store.get_interaction("ix-1")
    # It expires when it always would have.
    assert await store.due_interactions(expires_at - 0.001) == []
    assert [r.interaction_id for r in await store.due_interactions(expires_at)] == ["ix-1"]
    assert [r.interaction_id for r in await store.run_interactions("run-grandchild")] == ["ix-1"]


async def test_a_re_added_pending_id_without_a_card_stays_without_one(store: Store) -> None:
    """A card Slack refused leaves none to keep: the caller posts one again."""
    await store.add_interactions([make_interaction("ix-1", message_ts=None, created_at=T0)])
    [record] = await store.add_interactions(
        [make_interaction("ix-1", "run-2", message_ts=None, created_at=T0 + 9)]
    )
    assert (record.run_id, record.message_ts, record.created_at) == ("run-2", None, T0)


async def test_a_re_added_approval_keeps_its_nudges_under_its_new_rule(store: Store) -> None:
    def approval(run_id: str, created_at: float, remind_after: float) -> InteractionRecord:
        rule = Approval(remind_after=remind_after, escalate_to=["U0DAVE"], escalate_after=30.25)
        return make_interaction(
            "ix-1",
            run_id,
            kind="approval",
            payload={"tool": "deploy", "rule": rule.to_json()},
            response_schema={"type": "boolean"},
            created_at=created_at,
            expires_at=T0 + 3600,
        )

    await store.add_interactions([approval("run-1", T0, 60)])
    await store.add_interactions([approval("run-2", T0 + 500, 120.5)])
    remind_at = T0 + 120.5
    assert await store.due_nudges(remind_at - 0.001) == []
    [due] = await store.due_nudges(remind_at)
    assert (due.kind, due.due_at, due.record.run_id) == ("reminder", remind_at, "run-2")
    assert (await store.mark_nudged("ix-1", "reminder", now=remind_at)).won
    [due] = await store.due_nudges(remind_at + 30.25)
    assert (due.kind, due.due_at) == ("escalation", remind_at + 30.25)


async def test_a_re_added_answered_id_comes_back_as_stored(store: Store) -> None:
    first = make_interaction("ix-1", payload={"v": 1}, created_at=T0)
    await store.add_interactions([first])
    answer = {"approved": True, "grant": "grant_abc"}
    claim = await answer_only(store, "ix-1", answer=answer, answered_by="U1", now=time.time())
    assert claim.won and claim.record is not None

    stored = await store.add_interactions(
        [make_interaction("ix-1", "run-2", payload={"v": 2}), make_interaction("ix-new", "run-2")]
    )
    assert stored[0] == claim.record == await store.get_interaction("ix-1")
    assert (stored[0].run_id, stored[0].payload, stored[0].answer) == ("run-1", {"v": 1}, answer)
    assert stored[1].interaction_id == "ix-new" and stored[1].status == "pending"
    assert [r.interaction_id for r in await store.run_interactions("run-2")] == ["ix-new"]


async def test_a_pending_id_that_does_not_read_is_replaced_as_given(
    store: Store, store_url: str
) -> None:
    await store.add_interactions([make_interaction("ix-1", created_at=T0)])
    await overwrite_raw(store, store_url, "interactions", "ix-1", "[1, 2")
    fresh = make_interaction("ix-1", "run-2", created_at=T0 + 7)
    [record] = await store.add_interactions([fresh])
    assert record == fresh == await store.get_interaction("ix-1")
