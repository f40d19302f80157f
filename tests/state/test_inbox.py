"""The inbox contract, on both stores: items are leased to one consumer at a time, handed to
another once a lease runs out, kept by a heartbeat, and removed when done."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from state import CorruptRecordError, Inbox, SQLiteStore, Store, UsageError, WorkItem

# Coordination records, kept out of `state.__all__`: this test pins the store's side.
from ..conftest import answer_only, votes
from .conftest import make_interaction, overwrite_raw

LEASE = 0.2
"""Short leases keep the tests fast; Redis measures them with the server's idle time."""


async def take_once_ready(
    store: Store, consumer: str, *, lease: float = LEASE, within: float = 3.0
) -> tuple[list[WorkItem], float]:
    """Take until something comes back (a lease has to run out first); the items and how long
    that took."""
    start = time.monotonic()
    while time.monotonic() - start < within:
        items = await store.take(consumer, lease=lease)
        if items:
            return items, time.monotonic() - start
        await asyncio.sleep(0.02)
    return [], time.monotonic() - start


def bodies(items: list[WorkItem]) -> list[Any]:
    return [item.body["n"] for item in items]


async def test_both_stores_are_inboxes(store: Store) -> None:
    assert isinstance(store, Inbox)


async def test_an_item_is_taken_with_what_was_enqueued_and_gone_once_done(store: Store) -> None:
    before = time.time()
    body = {"n": 1, "event": {"text": "déployer ✓", "blocks": [{"a": [1, 2.5, None, True]}]}}
    item_id = await store.enqueue("event", body)
    assert isinstance(item_id, str) and item_id

    [item] = await store.take("worker-a")
    assert item == WorkItem(
        item_id=item_id, kind="event", body=body, attempts=1, enqueued_at=item.enqueued_at
    )
    # Redis stamps items with the server's clock, in milliseconds.
    assert before - 1 <= item.enqueued_at <= time.time() + 1
    assert await store.inbox_size() == 1

    await store.done(item_id)
    assert await store.inbox_size() == 0
    assert await store.take("worker-a") == []
    assert await store.take("worker-b") == []


async def test_a_body_of_any_json_text_round_trips(store: Store) -> None:
    """A lone surrogate is valid JSON (`"\\ud800"`) but not UTF-8; a hostile payload may hold
    one, and it must neither fail the write nor the read."""
    body = {"text": "\ud800 \u00e9 \U0001f680", "nested": {"": [{}, [], "\x00"]}}
    await store.enqueue("event", body)
    [item] = await store.take("worker-a")
    assert item.body == body


async def test_an_empty_inbox_gives_nothing(store: Store) -> None:
    assert await store.take("worker-a") == []
    assert await store.inbox_size() == 0


async def test_items_come_out_in_enqueue_order(store: Store) -> None:
    for n in range(25):
        await store.enqueue("event", {"n": n})
    first = await store.take("worker-a", count=10)
    second = await store.take("worker-b", count=10)
    third = await store.take("worker-a", count=10)
    assert bodies(first) == list(range(10))
    assert bodies(second) == list(range(10, 20))
    assert bodies(third) == list(range(20, 25))


async def test_count_bounds_a_take(store: Store) -> None:
    for n in range(5):
        await store.enqueue("action", {"n": n})
    assert len(await store.take("worker-a", count=2)) == 2
    assert len(await store.take("worker-a")) == 3
    assert await store.take("worker-a") == []


async def test_a_dedupe_key_enqueues_once(store: Store) -> None:
    first = await store.enqueue("event", {"n": 1}, dedupe="Ev1")
    again = await store.enqueue("event", {"n": 2}, dedupe="Ev1")
    other = await store.enqueue("event", {"n": 3}, dedupe="Ev2")
    plain = [await store.enqueue("event", {"n": 4}) for _ in range(2)]

    assert first is not None and again is None and other is not None
    assert None not in plain
    assert len({first, other, *plain}) == 4
    taken = await store.take("worker-a")
    assert bodies(taken) == [1, 3, 4, 4]
    assert await store.inbox_size() == 4


async def test_a_dedupe_key_stays_seen_after_its_item_is_done(store: Store) -> None:
    """Slack retries for minutes; a retry after the work is finished must not redo it."""
    item_id = await store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert item_id is not None
    [item] = await store.take("worker-a")
    await store.done(item.item_id)
    assert await store.enqueue("event", {"n": 1}, dedupe="Ev1") is None


async def test_concurrent_enqueues_of_one_dedupe_key_add_one_item(store: Store) -> None:
    ids = await asyncio.gather(*(store.enqueue("event", {"n": n}, dedupe="Ev1") for n in range(20)))
    assert len([item_id for item_id in ids if item_id is not None]) == 1
    assert await store.inbox_size() == 1


async def test_a_leased_item_goes_to_another_consumer_when_its_lease_runs_out(
    store: Store,
) -> None:
    item_id = await store.enqueue("event", {"n": 1})
    [first] = await store.take("worker-a", lease=LEASE)
    assert await store.take("worker-b", lease=LEASE) == []  # still leased to worker-a

    [second], waited = await take_once_ready(store, "worker-b")
    assert second.item_id == item_id and second.body == {"n": 1}
    assert (first.attempts, second.attempts) == (1, 2)
    assert waited >= LEASE * 0.5
    # And again once worker-b's lease runs out: every hand-out counts.
    [third], _ = await take_once_ready(store, "worker-c")
    assert third.attempts == 3


async def test_expired_leases_are_handed_out_before_new_items(store: Store) -> None:
    await store.enqueue("event", {"n": 1})
    await store.take("worker-a", lease=LEASE)
    await store.enqueue("event", {"n": 2})
    await store.enqueue("event", {"n": 3})
    await asyncio.sleep(LEASE + 0.05)
    taken = await store.take("worker-b", count=2, lease=LEASE)
    assert [(item.body["n"], item.attempts) for item in taken] == [(1, 2), (2, 1)]


async def test_a_heartbeat_keeps_an_item_and_tells_when_it_was_lost(store: Store) -> None:
    lease = 0.3
    item_id = await store.enqueue("event", {"n": 1})
    [item] = await store.take("worker-a", lease=lease)
    # Renew for three lease lengths; worker-b, taking all the while, never gets it.
    deadline = time.monotonic() + 3 * lease
    while time.monotonic() < deadline:
        await asyncio.sleep(lease / 3)
        assert await store.extend("worker-a", [item.item_id], lease=lease) == [item_id]
        assert await store.take("worker-b", lease=lease) == []

    [stolen], _ = await take_once_ready(store, "worker-b", lease=lease)
    assert stolen.item_id == item_id and stolen.attempts == 2
    assert await store.extend("worker-a", [item_id], lease=lease) == []
    assert await store.extend("worker-b", [item_id], lease=lease) == [item_id]


async def test_extend_keeps_only_what_the_consumer_holds(store: Store) -> None:
    mine = await store.enqueue("event", {"n": 1})
    theirs = await store.enqueue("event", {"n": 2})
    waiting = await store.enqueue("event", {"n": 3})
    assert mine and theirs and waiting
    await store.take("worker-a", count=1)
    await store.take("worker-b", count=1)
    finished = await store.enqueue("event", {"n": 4})
    assert finished
    await store.done(finished)

    held = await store.extend("worker-a", [theirs, mine, waiting, finished], lease=LEASE)
    assert held == [mine]
    assert await store.extend("worker-a", [], lease=LEASE) == []
    # Nothing was taken from worker-b, and the waiting item is still new.
    assert await store.extend("worker-b", [theirs], lease=LEASE) == [theirs]
    [item] = await store.take("worker-c")
    assert (item.item_id, item.attempts) == (waiting, 1)


async def test_done_is_idempotent_and_by_anyone(store: Store) -> None:
    item_id = await store.enqueue("event", {"n": 1})
    assert item_id is not None
    await store.take("worker-a")
    await store.done(item_id)  # a consumer that finished after losing its lease
    await store.done(item_id)
    assert await store.inbox_size() == 0
    assert await store.extend("worker-a", [item_id], lease=LEASE) == []


async def test_a_finished_item_is_not_handed_out_again(store: Store) -> None:
    item_id = await store.enqueue("event", {"n": 1})
    assert item_id is not None
    await store.take("worker-a", lease=LEASE)
    await store.done(item_id)
    await asyncio.sleep(LEASE + 0.05)
    assert await store.take("worker-b", lease=LEASE) == []


async def test_inbox_size_counts_waiting_and_leased_items(store: Store) -> None:
    ids = [await store.enqueue("event", {"n": n}) for n in range(3)]
    assert await store.inbox_size() == 3
    await store.take("worker-a", count=2)
    assert await store.inbox_size() == 3
    assert ids[0] is not None
    await store.done(ids[0])
    assert await store.inbox_size() == 2


async def test_a_blocking_take_wakes_when_another_task_enqueues(store: Store) -> None:
    start = time.monotonic()
    taking = asyncio.create_task(store.take("worker-a", block=5.0))
    await asyncio.sleep(0.05)
    assert not taking.done()
    item_id = await store.enqueue("event", {"n": 1})
    [item] = await asyncio.wait_for(taking, 5)
    assert item.item_id == item_id
    assert time.monotonic() - start < 1.0


async def test_a_blocking_take_returns_nothing_after_its_wait(store: Store) -> None:
    start = time.monotonic()
    assert await store.take("worker-a", block=0.15) == []
    assert 0.14 <= time.monotonic() - start < 2.0


async def test_a_blocking_take_returns_ready_items_at_once(store: Store) -> None:
    await store.enqueue("event", {"n": 1})
    start = time.monotonic()
    assert bodies(await store.take("worker-a", block=5.0)) == [1]
    assert time.monotonic() - start < 1.0


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"consumer": ""}, "consumer"),
        ({"count": 0}, "count"),
        ({"lease": 0}, "lease"),
        ({"lease": float("inf")}, "lease"),
        ({"block": -1}, "block"),
        ({"block": float("nan")}, "block"),
    ],
)
async def test_take_refuses_arguments_that_cannot_work(
    store: Store, args: dict[str, Any], match: str
) -> None:
    call: dict[str, Any] = {"consumer": "worker-a", **args}
    with pytest.raises(ValueError, match=match):
        await store.take(call.pop("consumer"), **call)


async def test_enqueue_refuses_what_is_not_json_data(store: Store) -> None:
    with pytest.raises(ValueError, match="body"):
        await store.enqueue("event", {"at": object()})
    with pytest.raises(ValueError, match="body"):
        await store.enqueue("event", {"n": float("nan")})
    with pytest.raises(ValueError, match="dedupe"):
        await store.enqueue("event", {"n": 1}, dedupe="")
    assert await store.inbox_size() == 0


async def test_an_id_the_store_never_assigns_is_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="not an item id"):
        await store.done("not-an-id")
    with pytest.raises(ValueError, match="not an item id"):
        await store.extend("worker-a", ["not-an-id"], lease=LEASE)
    with pytest.raises(TypeError):
        await store.extend("worker-a", "1", lease=LEASE)
    with pytest.raises(ValueError, match="consumer"):
        await store.extend("", [], lease=LEASE)
    with pytest.raises(ValueError, match="lease"):
        await store.extend("worker-a", [], lease=-1)


async def test_an_item_about_an_interaction_comes_with_it(store: Store) -> None:
    """A click names the interaction it is about; whoever takes the item gets that interaction
    read in a round trip the item makes anyway (no read of its own), as stored no earlier than
    the item was added and no later than it was taken; a retry reads it itself."""
    record = make_interaction("ix-about", votes=votes(("U0BOB", 1.5)))
    await store.add_interactions([record])
    clicked = await store.enqueue("action", {"n": 1}, about="ix-about")
    missing = await store.enqueue("action", {"n": 2}, about="ix-nobody-added")
    plain = await store.enqueue("event", {"n": 3})

    taken = {item.item_id: item for item in await store.take("worker-a")}
    assert set(taken) == {clicked, missing, plain}
    assert taken[clicked].about == "ix-about"
    assert taken[clicked].interaction == await store.get_interaction("ix-about") == record
    assert (taken[missing].about, taken[missing].interaction) == ("ix-nobody-added", None)
    assert (taken[plain].about, taken[plain].interaction) == (None, None)


async def test_items_enqueued_together_each_come_with_their_own_interaction(
    store: Store,
) -> None:
    await store.add_interactions([make_interaction(f"ix-{n}", run_id=f"run-{n}") for n in range(8)])
    ids = await asyncio.gather(
        *(store.enqueue("action", {"n": n}, about=f"ix-{n}") for n in range(8))
    )
    items = await store.take("worker-a", count=8)
    assert sorted(item.item_id for item in items) == sorted(i for i in ids if i)
    for item in items:
        assert item.about == f"ix-{item.body['n']}"
        assert item.interaction is not None
        assert (item.interaction.interaction_id, item.interaction.run_id) == (
            f"ix-{item.body['n']}",
            f"run-{item.body['n']}",
        )


async def test_an_interaction_changed_after_the_enqueue_is_read_as_one_of_its_versions(
    store: Store,
) -> None:
    await store.add_interactions([make_interaction("ix-later")])
    await store.enqueue("action", {"n": 1}, about="ix-later")
    await answer_only(store, "ix-later", answer="postgres", answered_by="U0BOB", now=time.time())
    [item] = await store.take("worker-a")
    assert item.interaction is not None
    # Redis read it with the enqueue, SQLite with the take: either version, never a mix.
    seen = (item.interaction.status, item.interaction.answer, item.interaction.answered_by)
    assert seen in {("pending", None, None), ("answered", "postgres", "U0BOB")}


async def test_about_must_name_an_interaction(store: Store) -> None:
    with pytest.raises(UsageError):
        await store.enqueue("action", {"n": 1}, about="")
    assert await store.inbox_size() == 0


async def test_a_file_written_before_about_keeps_its_items_and_gets_the_column(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,"
            " body TEXT NOT NULL, enqueued_at REAL NOT NULL, owner TEXT,"
            " lease_until REAL NOT NULL DEFAULT 0, attempts INTEGER NOT NULL DEFAULT 0)"
        )
        conn.execute(
            "INSERT INTO inbox (kind, body, enqueued_at) VALUES ('action', '{\"n\": 1}', 1.0)"
        )
    conn.close()
    async with SQLiteStore(str(path)) as store:
        await store.add_interactions([make_interaction("ix-new")])
        await store.enqueue("action", {"n": 2}, about="ix-new")
        old, new = await store.take("worker-a")
        assert (old.body, old.about, old.interaction) == ({"n": 1}, None, None)
        assert new.about == "ix-new" and new.interaction is not None


async def test_an_item_about_a_corrupt_interaction_is_still_taken(
    store: Store, store_url: str
) -> None:
    """A stored interaction that does not read back never stops the inbox: the item comes
    without it (`about` None), and its worker reads it itself, meeting the corrupt record where
    a click always has."""
    await store.add_interactions([make_interaction("ix-bad")])
    await overwrite_raw(store, store_url, "interactions", "ix-bad", "{not json")
    clicked = await store.enqueue("action", {"n": 1}, about="ix-bad")
    after = await store.enqueue("event", {"n": 2})
    items = {item.item_id: item for item in await store.take("worker-a")}
    assert set(items) == {clicked, after}
    assert (items[clicked].about, items[clicked].interaction) == (None, None)
    with pytest.raises(CorruptRecordError):
        await store.get_interaction("ix-bad")
