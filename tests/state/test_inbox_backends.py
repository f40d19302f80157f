"""What each store does underneath the inbox contract: the Redis stream and its keys, the SQLite
table and its locks, and a failed write that must leave no dedupe mark behind."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis
from redis.crc import key_slot

from state import CorruptRecordError, RedisStore, SQLiteStore, StoreError

# Each backend's own structures (stream, group, marks, table), reached raw.
from state._keys import DELIVERY_TTL, INBOX_GROUP, RedisKeys
from state._url import redis_options

from .conftest import raw_client, redis_keys

LEASE = 0.2

# Redis


@pytest.fixture(params=["redis", "cluster"])
def any_redis_url(request: pytest.FixtureRequest) -> str:
    """A store URL on the single Redis, then on the Redis Cluster."""
    return str(request.getfixturevalue(f"{request.param}_store_url"))


@pytest.fixture
async def redis_store(any_redis_url: str) -> AsyncIterator[RedisStore]:
    async with RedisStore.from_url(any_redis_url) as opened:
        yield opened


@pytest.fixture
async def raw(any_redis_url: str) -> AsyncIterator[aioredis.Redis | aioredis.RedisCluster]:
    client = raw_client(any_redis_url)
    yield client
    await client.aclose()


@pytest.mark.parametrize("prefix", ["hb:", "team-a:", "x{y}:", "odd{"])
def test_the_stream_and_its_dedupe_marks_share_one_cluster_slot(prefix: str) -> None:
    keys = RedisKeys(prefix)
    slots = {key_slot(key.encode()) for key in (keys.inbox, keys.inbox_seen("Ev1"))}
    slots.add(key_slot(keys.inbox_seen("another:event").encode()))
    assert len(slots) == 1
    assert keys.inbox.startswith(prefix) and keys.inbox_seen("Ev1").startswith(prefix)


async def test_the_inbox_is_a_stream_with_a_consumer_group(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    keys = redis_keys(redis_store)
    item_id = await redis_store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert item_id is not None
    assert await raw.type(keys.inbox) == b"stream"
    assert DELIVERY_TTL - 5 <= await raw.ttl(keys.inbox_seen("Ev1")) <= DELIVERY_TTL

    await redis_store.take("worker-a")
    pending = await raw.xpending_range(keys.inbox, INBOX_GROUP, "-", "+", 10)
    assert [(p["message_id"].decode(), p["consumer"].decode()) for p in pending] == [
        (item_id, "worker-a")
    ]
    await redis_store.done(item_id)
    assert await raw.xlen(keys.inbox) == 0
    assert (await raw.xpending(keys.inbox, INBOX_GROUP))["pending"] == 0


async def test_items_enqueued_before_any_consumer_existed_are_delivered(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    """The group starts at id 0: a group created at `$` would skip these for ever."""
    keys = redis_keys(redis_store)
    await redis_store.enqueue("event", {"n": 1})
    await redis_store.enqueue("event", {"n": 2})
    assert await raw.xinfo_groups(keys.inbox) == []
    assert [item.body["n"] for item in await redis_store.take("worker-a")] == [1, 2]


async def test_the_inbox_works_again_after_its_key_was_deleted(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    await redis_store.enqueue("event", {"n": 1})
    await redis_store.take("worker-a")
    await raw.delete(redis_keys(redis_store).inbox)
    assert await redis_store.extend("worker-a", ["1-0"], lease=LEASE) == []
    await redis_store.enqueue("event", {"n": 2})
    assert [item.body["n"] for item in await redis_store.take("worker-a")] == [2]


async def test_an_entry_deleted_while_leased_is_acked_away(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    keys = redis_keys(redis_store)
    item_id = await redis_store.enqueue("event", {"n": 1})
    await redis_store.take("worker-a", lease=LEASE)
    await raw.xdel(keys.inbox, item_id)  # gone without an XACK: still pending in the group
    await asyncio.sleep(LEASE + 0.05)
    assert await redis_store.take("worker-b", lease=LEASE) == []
    assert (await raw.xpending(keys.inbox, INBOX_GROUP))["pending"] == 0


async def test_a_failed_xadd_leaves_no_dedupe_mark_on_redis(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    keys = redis_keys(redis_store)
    await raw.set(keys.inbox, "not a stream")  # every XADD now fails with WRONGTYPE
    with pytest.raises(StoreError, match="WRONGTYPE"):
        await redis_store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert await raw.exists(keys.inbox_seen("Ev1")) == 0

    await raw.delete(keys.inbox)
    assert await redis_store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None
    assert await redis_store.inbox_size() == 1


def sync_client(url: str) -> redis.Redis | redis.RedisCluster:
    """A blocking client: a read with it runs before the event loop can write anything more."""
    options = redis_options(url)
    if options.cluster:
        return redis.RedisCluster.from_url(options.client_url)
    return redis.Redis.from_url(options.client_url)


async def test_concurrent_enqueues_are_each_in_redis_when_they_return(
    redis_store: RedisStore, any_redis_url: str
) -> None:
    """A burst of enqueues shares round trips, and each returns only once its entry is stored:
    the blocking read right after each return finds it."""
    keys = redis_keys(redis_store)
    client = sync_client(any_redis_url)
    missing: list[str] = []

    async def enqueue(n: int) -> str | None:
        item_id = await redis_store.enqueue("action", {"n": n}, dedupe=f"Ev{n % 40}")
        if item_id is not None and not client.xrange(keys.inbox, item_id, item_id):
            missing.append(item_id)
        return item_id

    try:
        ids = await asyncio.gather(*(enqueue(n) for n in range(120)))
    finally:
        client.close()
    assert missing == []
    assert sum(item_id is not None for item_id in ids) == 40  # one per dedupe key
    assert await redis_store.inbox_size() == 40
    taken = await redis_store.take("worker-a", count=100)
    assert sorted(item.body["n"] for item in taken) == list(range(40))


async def test_a_failed_burst_of_enqueues_refuses_each_and_leaves_no_mark_on_redis(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    keys = redis_keys(redis_store)
    await raw.set(keys.inbox, "not a stream")
    results = await asyncio.gather(
        *(redis_store.enqueue("action", {"n": n}, dedupe=f"Ev{n}") for n in range(20)),
        return_exceptions=True,
    )
    assert all(isinstance(result, StoreError) for result in results), results
    assert [await raw.exists(keys.inbox_seen(f"Ev{n}")) for n in range(20)] == [0] * 20

    await raw.delete(keys.inbox)
    assert await redis_store.enqueue("action", {"n": 0}, dedupe="Ev0") is not None


async def test_an_entry_without_a_json_body_is_corrupt(
    redis_store: RedisStore, raw: aioredis.Redis | aioredis.RedisCluster
) -> None:
    keys = redis_keys(redis_store)
    item_id = (await raw.xadd(keys.inbox, {"kind": "event", "body": "{not json"})).decode()
    with pytest.raises(CorruptRecordError, match="work item") as caught:
        await redis_store.take("worker-a")
    assert caught.value.key == f"{keys.inbox}/{item_id}"


# SQLite


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "handback.db"


@pytest.fixture
async def sqlite_store(db: Path) -> AsyncIterator[SQLiteStore]:
    async with SQLiteStore(db) as opened:
        yield opened


def run_sql(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        with conn:
            return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_a_failed_insert_leaves_no_dedupe_mark_on_sqlite(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    run_sql(
        db,
        "CREATE TRIGGER refuse BEFORE INSERT ON inbox"
        " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    with pytest.raises(StoreError, match="disk is full"):
        await sqlite_store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert run_sql(db, "SELECT count(*) FROM inbox_seen") == [(0,)]

    run_sql(db, "DROP TRIGGER refuse")
    assert await sqlite_store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None


async def test_concurrent_enqueues_are_each_in_the_file_when_they_return(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    """A burst of enqueues shares transactions, and each returns only once its row is
    committed: another connection's read right after each return finds it."""
    reader = sqlite3.connect(db)
    missing: list[str] = []

    async def enqueue(n: int) -> str | None:
        item_id = await sqlite_store.enqueue("action", {"n": n}, dedupe=f"Ev{n % 40}")
        found = reader.execute("SELECT 1 FROM inbox WHERE seq = ?", (item_id,)).fetchall()
        if item_id is not None and not found:
            missing.append(item_id)
        return item_id

    try:
        ids = await asyncio.gather(*(enqueue(n) for n in range(120)))
    finally:
        reader.close()
    assert missing == []
    assert sum(item_id is not None for item_id in ids) == 40  # one per dedupe key
    taken = await sqlite_store.take("worker-a", count=100)
    assert sorted(item.body["n"] for item in taken) == list(range(40))


async def test_a_failed_burst_of_enqueues_refuses_each_and_writes_nothing_on_sqlite(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    """One item the file refuses fails the transaction, so every enqueue of its burst is
    refused: none was written, none of their dedupe marks either, and all may be retried."""
    run_sql(
        db,
        "CREATE TRIGGER refuse BEFORE INSERT ON inbox WHEN NEW.body LIKE '%\"n\":7}%'"
        " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
    )
    results = await asyncio.gather(
        *(sqlite_store.enqueue("action", {"n": n}, dedupe=f"Ev{n}") for n in range(10)),
        return_exceptions=True,
    )
    assert all(isinstance(result, StoreError) for result in results), results
    assert run_sql(db, "SELECT count(*) FROM inbox") == [(0,)]
    assert run_sql(db, "SELECT count(*) FROM inbox_seen") == [(0,)]

    run_sql(db, "DROP TRIGGER refuse")
    ids = await asyncio.gather(
        *(sqlite_store.enqueue("action", {"n": n}, dedupe=f"Ev{n}") for n in range(10))
    )
    assert None not in ids


async def test_item_ids_are_never_reused(sqlite_store: SQLiteStore) -> None:
    """A late `done` of a finished item must not delete the item enqueued after it."""
    first = await sqlite_store.enqueue("event", {"n": 1})
    assert first is not None
    await sqlite_store.done(first)
    second = await sqlite_store.enqueue("event", {"n": 2})
    assert second != first
    await sqlite_store.done(first)
    assert await sqlite_store.inbox_size() == 1


async def test_a_dedupe_mark_past_its_retention_is_unseen_and_pruned(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    assert await sqlite_store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None
    run_sql(db, "UPDATE inbox_seen SET keep_until = ?", time.time() - 1)
    assert await sqlite_store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None

    assert await sqlite_store.enqueue("event", {"n": 1}, dedupe="Ev2") is not None
    run_sql(db, "UPDATE inbox_seen SET keep_until = ? WHERE dedupe = 'Ev2'", time.time() - 1)
    await sqlite_store.aclose()
    async with SQLiteStore(db):
        assert run_sql(db, "SELECT dedupe FROM inbox_seen") == [("Ev1",)]


async def test_a_blocking_take_sees_an_item_another_process_enqueued(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    """No event crosses processes: the blocking take polls the file."""
    async with SQLiteStore(db) as other:
        start = time.monotonic()
        taking = asyncio.create_task(sqlite_store.take("worker-a", block=5.0))
        await asyncio.sleep(0.1)
        assert not taking.done()
        item_id = await other.enqueue("event", {"n": 1})
        [item] = await asyncio.wait_for(taking, 5)
    assert item.item_id == item_id
    assert time.monotonic() - start < 1.0


async def test_polling_an_empty_inbox_waits_for_no_write_lock(
    sqlite_store: SQLiteStore, db: Path
) -> None:
    """Another process writing (for as long as the 5 s busy timeout) does not hold up a take
    that finds nothing: it only reads."""
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        assert await asyncio.wait_for(sqlite_store.take("worker-a"), 1.0) == []
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_a_row_without_a_json_body_is_corrupt(sqlite_store: SQLiteStore, db: Path) -> None:
    item_id = await sqlite_store.enqueue("event", {"n": 1})
    run_sql(db, "UPDATE inbox SET body = '[1]'")
    with pytest.raises(CorruptRecordError, match="JSON object") as caught:
        await sqlite_store.take("worker-a")
    assert caught.value.key == f"inbox/{item_id}"
