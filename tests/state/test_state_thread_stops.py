"""Stop marks and stream messages: what the Slack app keeps so that a stop reaches the process
running a turn, and a retried turn finds the message its first attempt streamed into."""

from __future__ import annotations

import pytest

from state import CorruptRecordError, RedisStore, SQLiteStore, Store, ThreadStop

from .conftest import raw_client, raw_sqlite, redis_keys


async def test_the_last_stop_of_a_thread_is_kept(store: Store) -> None:
    assert await store.thread_stop("C1", "1.1") is None
    await store.stop_thread("C1", "1.1", ThreadStop(user="U1", at=100.5))
    await store.stop_thread("C1", "1.1", ThreadStop(user="U2", at=101.25))
    await store.stop_thread("C1:x", "1.1", ThreadStop(user="U3", at=1.0))
    assert await store.thread_stop("C1", "1.1") == ThreadStop(user="U2", at=101.25)
    assert await store.thread_stop("C1:x", "1.1") == ThreadStop(user="U3", at=1.0)
    assert await store.thread_stop("C1", "1.2") is None
    assert await store.thread_stop("C2", "1.1") is None


async def test_taking_a_threads_lease_reads_its_stop_mark(store: Store) -> None:
    """`take_thread` is `acquire_thread` with the thread's stop mark read in the same step,
    whether the lease was won or not."""
    # The take (whether the lease is held, and the stop mark) is the app's coordination record,
    # kept out of `state.__all__`: read here field by field.
    taken = await store.take_thread("C1", "1.1", owner="a", ttl=30)
    assert (taken.held, taken.stop) == (True, None)
    mark = ThreadStop(user="U1", at=100.5, event_id="Ev1")
    await store.stop_thread("C1", "1.1", mark)
    await store.stop_thread("C1", "1.2", ThreadStop(user="U2", at=1.0))
    taken = await store.take_thread("C1", "1.1", owner="b", ttl=30)
    assert (taken.held, taken.stop) == (False, mark)
    taken = await store.take_thread("C1", "1.1", owner="a", ttl=30)
    assert (taken.held, taken.stop) == (True, mark)
    assert not await store.acquire_thread("C1", "1.1", owner="b", ttl=30)
    await store.release_thread("C1", "1.1", owner="a")
    assert (await store.take_thread("C1", "1.1", owner="b", ttl=30)).held
    taken = await store.take_thread("C2", "1.1", owner="b", ttl=30)
    assert (taken.held, taken.stop) == (True, None)


async def test_a_run_remembers_the_message_it_streams_into(store: Store) -> None:
    assert await store.run_stream("run-1") is None
    await store.set_run_stream("run-1", "1700000000.000100")
    await store.set_run_stream("run-2", "1700000000.000200")
    assert await store.run_stream("run-1") == "1700000000.000100"
    assert await store.run_stream("run-2") == "1700000000.000200"


async def test_a_corrupt_stop_mark_is_reported(store: Store, store_url: str) -> None:
    await store.stop_thread("C1", "1.1", ThreadStop(user="U1", at=1.0))
    if isinstance(store, RedisStore):
        client = raw_client(store_url)
        await client.set(redis_keys(store).thread_stop("C1", "1.1"), '{"user": 5}')
        await client.aclose()
    else:
        assert isinstance(store, SQLiteStore)
        with raw_sqlite(store_url) as conn:
            conn.execute("UPDATE thread_stops SET rec = '{\"user\": 5}'")
        conn.close()
    with pytest.raises(CorruptRecordError, match="thread stop"):
        await store.thread_stop("C1", "1.1")
    with pytest.raises(CorruptRecordError, match="thread stop"):
        await store.take_thread("C1", "1.1", owner="a", ttl=30)


async def test_a_won_lease_records_who_started_the_turn(store: Store) -> None:
    """Who may stop a turn is read from what its lease recorded: only a take that wins the
    lease (with an initiator) writes it; a lost take, or one without, keeps the last one."""
    assert await store.thread_initiator("C1", "1.1") is None
    await store.take_thread("C1", "1.1", owner="a", ttl=30, initiator="U1")
    assert await store.thread_initiator("C1", "1.1") == "U1"
    await store.take_thread("C1", "1.1", owner="b", ttl=30, initiator="U2")  # lost
    assert await store.thread_initiator("C1", "1.1") == "U1"
    await store.take_thread("C1", "1.1", owner="a", ttl=30)  # a refresh says nobody new
    assert await store.thread_initiator("C1", "1.1") == "U1"
    await store.release_thread("C1", "1.1", owner="a")
    await store.take_thread("C1", "1.1", owner="b", ttl=30, initiator="U2")
    assert await store.thread_initiator("C1", "1.1") == "U2"
    assert await store.thread_initiator("C1", "1.2") is None
    assert await store.thread_initiator("C1:1", "1") is None
