"""Taking with the enqueue, on both stores and a cluster: the write that records items also
leases the oldest new ones to a consumer of the same process (`Taker`), up to the room it
reports, and those items are then that consumer's exactly as if it had taken them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from state import Store, Taker, UsageError, WorkItem

from .test_inbox import LEASE, bodies, take_once_ready


@dataclass
class Hands:
    """A taker's side: the room it reports (one value per write asked) and what it got."""

    room: int
    asked: int = 0
    got: list[list[WorkItem]] = field(default_factory=list)

    def taker(self, consumer: str = "worker-a", lease: float = LEASE) -> Taker:
        return Taker(consumer=consumer, lease=lease, room=self._room, accept=self.got.append)

    def _room(self) -> int:
        self.asked += 1
        return self.room

    @property
    def taken(self) -> list[WorkItem]:
        return [item for items in self.got for item in items]


async def test_an_enqueue_takes_the_oldest_new_items_up_to_the_room(store: Store) -> None:
    older = [await store.enqueue("event", {"n": n}) for n in range(3)]
    hands = Hands(room=2)
    item_id = await store.enqueue("event", {"n": 3}, taker=hands.taker())

    # The oldest undelivered items, not (only) the one written: as a `take` would get them.
    assert item_id is not None and hands.asked == 1
    assert bodies(hands.taken) == [0, 1]
    assert [item.item_id for item in hands.taken] == older[:2]
    assert all(item.kind == "event" and item.attempts == 1 for item in hands.taken)
    # Leased to the taker: renewable by it, not handed to anyone else.
    assert await store.extend("worker-a", older[:2], lease=LEASE) == older[:2]
    assert await store.extend("worker-b", older[:2], lease=LEASE) == []
    assert bodies(await store.take("worker-b")) == [2, 3]
    assert await store.inbox_size() == 4


async def test_a_room_larger_than_what_is_new_takes_everything_new(store: Store) -> None:
    hands = Hands(room=16)
    first = await store.enqueue("event", {"n": 1}, taker=hands.taker())
    second = await store.enqueue("event", {"n": 2}, taker=hands.taker())
    assert [[item.item_id for item in items] for items in hands.got] == [[first], [second]]
    assert await store.take("worker-b") == []


async def test_no_room_takes_nothing(store: Store) -> None:
    hands = Hands(room=0)
    item_id = await store.enqueue("event", {"n": 1}, taker=hands.taker())
    assert hands.asked == 1 and hands.taken == []
    [item] = await store.take("worker-b")
    assert item.item_id == item_id and item.attempts == 1


async def test_an_item_taken_and_not_done_goes_to_another_consumer_after_its_lease(
    store: Store,
) -> None:
    hands = Hands(room=1)
    item_id = await store.enqueue("event", {"n": 1}, taker=hands.taker())
    assert [item.item_id for item in hands.taken] == [item_id]
    assert await store.take("worker-b", lease=LEASE) == []  # leased to worker-a

    [again], waited = await take_once_ready(store, "worker-b")
    assert again.item_id == item_id and again.body == {"n": 1} and again.attempts == 2
    assert waited >= LEASE * 0.5
    await store.done(item_id)
    assert await store.inbox_size() == 0


async def test_expired_leases_are_left_to_take(store: Store) -> None:
    lapsed = await store.enqueue("event", {"n": 1})
    await store.take("worker-b", lease=LEASE)
    await asyncio.sleep(LEASE + 0.05)
    hands = Hands(room=5)
    fresh = await store.enqueue("event", {"n": 2}, taker=hands.taker())
    assert [item.item_id for item in hands.taken] == [fresh]
    [item] = await store.take("worker-c", lease=LEASE)
    assert (item.item_id, item.attempts) == (lapsed, 2)


async def test_a_dedupe_key_enqueues_once_with_a_taker(store: Store) -> None:
    hands = Hands(room=4)
    first = await store.enqueue("event", {"n": 1}, dedupe="Ev1", taker=hands.taker())
    again = await store.enqueue("event", {"n": 2}, dedupe="Ev1", taker=hands.taker())
    assert first is not None and again is None
    assert [[item.item_id for item in items] for items in hands.got] == [[first], []]
    await store.done(first)
    assert await store.enqueue("event", {"n": 3}, dedupe="Ev1", taker=hands.taker()) is None
    assert await store.inbox_size() == 0


async def test_enqueues_written_together_take_once_up_to_the_room(store: Store) -> None:
    """The group commit writes concurrent enqueues in one round trip: the taker is asked for
    its room once, and the batch takes at most that."""
    hands = Hands(room=3)
    ids = await asyncio.gather(
        *(store.enqueue("event", {"n": n}, taker=hands.taker()) for n in range(5))
    )
    assert hands.asked == 1 and len(hands.got) == 1
    assert [item.item_id for item in hands.taken] == ids[:3]
    assert bodies(await store.take("worker-b")) == [3, 4]


@pytest.mark.parametrize(
    "taker",
    [
        Taker(consumer="", lease=LEASE, room=lambda: 1, accept=lambda _: None),
        Taker(consumer="worker-a", lease=0, room=lambda: 1, accept=lambda _: None),
    ],
)
async def test_a_taker_that_cannot_work_is_refused(store: Store, taker: Taker) -> None:
    with pytest.raises(UsageError):
        await store.enqueue("event", {"n": 1}, taker=taker)
    assert await store.inbox_size() == 0


async def test_an_app_s_writes_take_only_where_that_saves_a_round_trip(
    store: Store, store_url: str
) -> None:
    """Redis (single or Cluster): a take of the worker's own is a network round trip, which
    the write that precedes the ack saves. SQLite: it is a call on the store's own thread,
    which the ack would wait for too, so the app's writes take nothing there."""
    assert store.enqueue_takes is (not store_url.startswith("sqlite"))
