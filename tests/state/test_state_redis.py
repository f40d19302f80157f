"""Redis specifics: one round trip per call, key TTLs, and what the hashes hold."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection

from state import (
    AuditEntry,
    RedisStore,
)

# Raw keys and their TTLs: the test reads what the store wrote into Redis.
from state._keys import (
    DELIVERY_TTL,
    INTERACTION_GRACE,
    LONGEST_WAIT,
    RUN_TTL,
    SETTLED_TTL,
    THREAD_TTL,
    RedisKeys,
)

from ..conftest import answer_only
from .conftest import make_interaction, make_run


class CountingConnection(Connection):
    """Counts writes to the socket: a pipeline or a script is one write, and one round trip."""

    sends = 0

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        type(self).sends += 1
        await super().send_packed_command(command, check_health)


@pytest.fixture
async def counted(redis_store_url: str) -> AsyncIterator[RedisStore]:
    base, prefix = redis_store_url.split("?prefix=", 1)
    pool = aioredis.ConnectionPool.from_url(base, connection_class=CountingConnection)
    client = aioredis.Redis(connection_pool=pool)
    async with RedisStore(client, prefix=prefix) as store:
        yield store
    await client.aclose()
    await pool.aclose()  # a client given a pool leaves its connections open


Operation = Callable[[RedisStore], Awaitable[object]]

OPERATIONS: dict[str, Operation] = {
    "save_run": lambda s: s.save_run(make_run()),
    "load_run": lambda s: s.load_run("run-1"),
    "save_run layout 2": lambda s: s.save_run(
        make_run("run-2", layout=2, transcript_id="run-2", transcript=[{"role": "user"}])
    ),
    "load_run layout 2": lambda s: s.load_run("run-2"),
    "claim_run": lambda s: s.claim_run("run-1", child_id="child"),
    "claim_run read layout 2": lambda s: s.claim_run("run-2", child_id="child", read=True),
    "release_run": lambda s: s.release_run("run-1", child_id="child"),
    "add_interactions": lambda s: s.add_interactions(
        [make_interaction("ix-1"), make_interaction("ix-2")]
    ),
    "get_interaction": lambda s: s.get_interaction("ix-1"),
    "run_interactions": lambda s: s.run_interactions("run-1"),
    "set_message": lambda s: s.set_message("ix-1", channel="C1", message_ts="1.2"),
    "answer_and_claim": lambda s: s.answer_and_claim(
        "ix-1",
        answer=1,
        answered_by="U1",
        now=time.time(),
        audit=AuditEntry(at=1.0, action="answered"),
    ),
    "close_interaction": lambda s: s.close_interaction("ix-2", status="expired", now=time.time()),
    "due_interactions": lambda s: s.due_interactions(time.time() + 1e6),
    "settled_runs": lambda s: s.settled_runs(),
    "set_thread_run": lambda s: s.set_thread_run("C1", "1.1", "run-1"),
    "get_thread_run": lambda s: s.get_thread_run("C1", "1.1"),
    "audit": lambda s: s.audit(AuditEntry(at=1.0, action="answered")),
    "recent_audit": lambda s: s.recent_audit(),
    "enqueue": lambda s: s.enqueue("event", {"n": 1}, dedupe="Ev1"),
    "take": lambda s: s.take("worker-a", lease=60),
    "extend": lambda s: s.extend("worker-a", ["1-0", "2-0"], lease=60),
    "done": lambda s: s.done("1-0"),
    "inbox_size": lambda s: s.inbox_size(),
}


# Reads through an index read the index first, then the keys it names: a script may only touch
# keys it is given (on a cluster it must). `settled_runs` here finds its index empty.
ROUND_TRIPS = {"run_interactions": 2, "due_interactions": 2}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
async def test_every_call_is_one_round_trip_or_two_through_an_index(
    counted: RedisStore, name: str
) -> None:
    await counted.save_run(make_run())
    await counted.save_run(
        make_run("run-2", layout=2, transcript_id="run-2", transcript=[{"role": "user"}])
    )
    await counted.add_interactions([make_interaction("ix-1"), make_interaction("ix-2")])
    operation = OPERATIONS[name]
    await operation(counted)  # the server learns the script on its first use
    CountingConnection.sends = 0
    await operation(counted)
    assert CountingConnection.sends == ROUND_TRIPS.get(name, 1)


async def test_settled_runs_reads_a_batch_in_three_round_trips(counted: RedisStore) -> None:
    """The index, then the runs with their interaction ids, then those interactions."""
    for run_id in ("run-1", "run-2"):
        await counted.save_run(make_run(run_id))
        await counted.add_interactions([make_interaction(f"ix-{run_id}", run_id=run_id)])
        await answer_only(counted, f"ix-{run_id}", answer=1, answered_by="U1", now=time.time())
    await counted.settled_runs()
    CountingConnection.sends = 0
    assert await counted.settled_runs() == ["run-1", "run-2"]
    assert CountingConnection.sends == 4  # the fourth finds the index's end


async def test_the_counter_sees_more_than_one_round_trip(counted: RedisStore) -> None:
    """The counting connection itself can fail: two calls are two writes."""
    await counted.load_run("run-1")
    CountingConnection.sends = 0
    await counted.load_run("run-1")
    await counted.load_run("run-2")
    assert CountingConnection.sends == 2


@pytest.fixture
async def raw(redis_store_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_store_url.split("?", 1)[0])
    yield client
    await client.aclose()


async def test_every_key_has_a_ttl_from_keys(counted: RedisStore, raw: aioredis.Redis) -> None:
    keys = RedisKeys(counted.prefix)
    expires_at = time.time() + 3600
    await counted.save_run(make_run())
    await counted.add_interactions([make_interaction("ix-1", expires_at=expires_at)])
    await counted.set_thread_run("C1", "1.1", "run-1")
    await counted.enqueue("event", {"n": 1}, dedupe="Ev1")

    def near(ttl: int, expected: float) -> bool:
        return expected - 5 <= ttl <= expected

    assert near(await raw.ttl(keys.run("run-1")), RUN_TTL)
    assert near(await raw.ttl(keys.interaction("ix-1")), 3600 + INTERACTION_GRACE)
    assert near(await raw.ttl(keys.run_interactions("run-1")), RUN_TTL)
    assert near(await raw.ttl(keys.thread("C1", "1.1")), THREAD_TTL)
    assert near(await raw.ttl(keys.inbox_seen("Ev1")), DELIVERY_TTL)


async def test_an_already_expired_interaction_is_kept_for_the_grace_period(
    counted: RedisStore, raw: aioredis.Redis
) -> None:
    await counted.add_interactions([make_interaction("ix-1", expires_at=0.0)])
    ttl = await raw.ttl(RedisKeys(counted.prefix).interaction("ix-1"))
    assert INTERACTION_GRACE - 5 <= ttl <= INTERACTION_GRACE
    assert await counted.get_interaction("ix-1") is not None


async def test_all_keys_live_under_the_prefix(counted: RedisStore, raw: aioredis.Redis) -> None:
    for operation in OPERATIONS.values():
        await operation(counted)
    keys = RedisKeys(counted.prefix)
    expected = {
        keys.run("run-1"),
        keys.run("run-2"),
        keys.transcripts,
        keys.transcripts_keep,
        keys.interaction("ix-1"),
        keys.interaction("ix-2"),
        keys.run_interactions("run-1"),
        keys.thread("C1", "1.1"),
        keys.audit,
        keys.inbox,
        keys.inbox_seen("Ev1"),
        keys.settled,  # `release_run` gave run-1 back to it
    }  # `due` is gone: both interactions left it, and Redis deletes an empty sorted set.
    found = {key.decode() async for key in raw.scan_iter(match=f"{counted.prefix}*")}
    assert found == expected


async def test_the_audit_log_is_capped(
    counted: RedisStore, raw: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("state._redis.AUDIT_CAP", 3)
    for n in range(5):
        await counted.audit(AuditEntry(at=float(n), action="answered"))
    assert await raw.llen(RedisKeys(counted.prefix).audit) == 3
    assert [entry.at for entry in await counted.recent_audit()] == [4.0, 3.0, 2.0]


async def test_due_drops_members_whose_interaction_expired_away(
    counted: RedisStore, raw: aioredis.Redis
) -> None:
    keys = RedisKeys(counted.prefix)
    await counted.add_interactions([make_interaction("gone", expires_at=1.0)])
    await raw.delete(keys.interaction("gone"))
    assert await counted.due_interactions(time.time()) == []
    assert await raw.zcard(keys.due) == 0


async def test_a_hash_without_its_json_is_corrupt(counted: RedisStore, raw: aioredis.Redis) -> None:
    from state import CorruptRecordError

    key = RedisKeys(counted.prefix).interaction("ix-1")
    await raw.hset(key, "status", "pending")
    with pytest.raises(CorruptRecordError):
        await answer_only(counted, "ix-1", answer=1, answered_by="U1", now=time.time())


async def test_the_settled_index_holds_a_run_until_its_claim(
    counted: RedisStore, raw: aioredis.Redis
) -> None:
    keys = RedisKeys(counted.prefix)
    await counted.save_run(make_run())
    await counted.add_interactions([make_interaction("ix-1"), make_interaction("ix-2")])
    await answer_only(counted, "ix-1", answer=1, answered_by="U1", now=time.time())
    # Marked on the first answer; `settled_runs` still checks that nothing is pending.
    assert await raw.zrange(keys.settled, 0, -1) == [b"run-1"]
    ttl = await raw.ttl(keys.settled)
    assert SETTLED_TTL - 5 <= ttl <= SETTLED_TTL
    assert await counted.settled_runs() == []
    await counted.close_interaction("ix-2", status="expired", now=time.time())
    assert await counted.settled_runs() == ["run-1"]
    assert (await counted.claim_run("run-1", child_id="child")).won
    assert await raw.exists(keys.settled) == 0


async def test_a_claimed_run_marked_by_a_late_close_is_dropped_by_the_next_read(
    counted: RedisStore, raw: aioredis.Redis
) -> None:
    """Superseding claims the run first and closes its cards after. The close cannot see the
    run's key (only the keys a script is given), so it marks the run; the next read drops it."""
    await counted.save_run(make_run())
    await counted.add_interactions([make_interaction("ix-1")])
    assert (await counted.claim_run("run-1", child_id="child")).won
    await counted.close_interaction("ix-1", status="superseded", now=time.time())
    assert await counted.settled_runs() == []
    assert await raw.exists(RedisKeys(counted.prefix).settled) == 0


async def test_settled_runs_drops_members_that_went_stale(
    counted: RedisStore, raw: aioredis.Redis
) -> None:
    keys = RedisKeys(counted.prefix)
    for run_id in ("gone", "done", "waiting", "stuck"):
        await counted.save_run(make_run(run_id))
        await counted.add_interactions([make_interaction(f"ix-{run_id}", run_id=run_id)])
        await answer_only(counted, f"ix-{run_id}", answer=1, answered_by="U1", now=time.time())
    await raw.delete(keys.run("gone"))
    await counted.save_run(make_run("done", status="success", reason=None))
    await counted.add_interactions([make_interaction("ix-more", run_id="waiting")])

    assert await counted.settled_runs() == ["stuck"]
    assert await raw.zrange(keys.settled, 0, -1) == [b"stuck", b"waiting"]


@pytest.fixture
async def redis_store(redis_store_url: str) -> AsyncIterator[RedisStore]:
    async with RedisStore.from_url(redis_store_url) as store:
        yield store


def _near(ttl: int, expected: float) -> bool:
    return expected - 5 <= ttl <= expected


async def test_saves_and_writes_refresh_ttls_as_keys_documents(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    keys = RedisKeys(redis_store.prefix)
    await redis_store.save_run(make_run())
    await redis_store.add_interactions([make_interaction("ix-1")])
    await redis_store.set_thread_run("C1", "1.1", "run-1")
    for key in (keys.run("run-1"), keys.run_interactions("run-1"), keys.thread("C1", "1.1")):
        await raw.expire(key, 10)

    await redis_store.save_run(make_run())
    assert _near(await raw.ttl(keys.run("run-1")), RUN_TTL)
    await redis_store.add_interactions([make_interaction("ix-2")])
    assert _near(await raw.ttl(keys.run_interactions("run-1")), RUN_TTL)
    await redis_store.set_thread_run("C1", "1.1", "run-2")
    assert _near(await raw.ttl(keys.thread("C1", "1.1")), THREAD_TTL)

    await answer_only(redis_store, "ix-1", answer=1, answered_by="U1", now=time.time())
    await raw.expire(keys.settled, 10)
    await redis_store.close_interaction("ix-2", status="expired", now=time.time())
    assert _near(await raw.ttl(keys.settled), SETTLED_TTL)
    # A claim is no save: it leaves the run's TTL as the last save set it.
    await raw.expire(keys.run("run-1"), 100)
    assert (await redis_store.claim_run("run-1", child_id="child")).won
    assert _near(await raw.ttl(keys.run("run-1")), 100)


async def test_a_far_future_expiry_keeps_the_interaction_for_the_longest_wait(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    await redis_store.add_interactions([make_interaction("ix-1", expires_at=1e20)])
    keys = RedisKeys(redis_store.prefix)
    assert _near(await raw.ttl(keys.interaction("ix-1")), LONGEST_WAIT + INTERACTION_GRACE)
    assert _near(await raw.ttl(keys.run_interactions("run-1")), LONGEST_WAIT + INTERACTION_GRACE)


async def test_a_repeat_delivery_does_not_extend_and_a_lapsed_one_is_new(
    redis_store: RedisStore, raw: aioredis.Redis
) -> None:
    key = RedisKeys(redis_store.prefix).inbox_seen("Ev1")
    assert await redis_store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None
    await raw.expire(key, 100)
    assert await redis_store.enqueue("event", {"n": 2}, dedupe="Ev1") is None
    assert _near(await raw.ttl(key), 100)
    await raw.pexpire(key, 1)
    async with asyncio.timeout(5):
        while await raw.exists(key):  # noqa: ASYNC110 - Redis signals no expiry here
            await asyncio.sleep(0.005)
    assert await redis_store.enqueue("event", {"n": 3}, dedupe="Ev1") is not None
    assert await redis_store.enqueue("event", {"n": 4}, dedupe="Ev1") is None
