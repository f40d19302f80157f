"""The Redis store on a Redis Cluster: `redis+cluster://` URLs, one hash tag per store so every
script touches one slot, and the pool's bound per node."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from state import RedisStore, StoreError, StoreURLError, open_store

# Raw keys and the parsed URL: the test checks where the store's keys land on the cluster.
from state._keys import RedisKeys
from state._url import redis_options

from ..conftest import UNCLOSED_FAILS, answer_only
from .cluster import LocalCluster
from .conftest import make_interaction, make_run, raw_client

pytestmark = UNCLOSED_FAILS


def _every_key(keys: RedisKeys) -> list[str]:
    return [
        keys.run("run-1"),
        keys.interaction("ix-1"),
        keys.run_interactions("run-1"),
        keys.due,
        keys.settled,
        keys.thread("C1", "1.1"),
        keys.thread_lease("C1", "1.1"),
        keys.inbox,
        keys.inbox_seen("Ev1"),
        keys.audit,
        keys.transcripts,
        keys.transcripts_keep,
    ]


@pytest.mark.parametrize("prefix", ["hb:", "team-a:", "a{b}:", "odd{", "x}y:", "{}:"])
def test_every_key_of_a_cluster_store_is_in_one_slot(prefix: str) -> None:
    keys = RedisKeys(prefix, cluster=True)
    assert len({key_slot(key.encode()) for key in _every_key(keys)}) == 1
    assert all(key.startswith(keys.namespace) for key in _every_key(keys))


def test_a_prefix_holding_a_hash_tag_is_kept_as_it_is() -> None:
    assert RedisKeys("app:{team-a}:", cluster=True).run("r") == "app:{team-a}:run:r"
    assert RedisKeys("hb:", cluster=True).run("r") == "{hb:}run:r"


def test_a_prefix_that_cannot_be_a_hash_tag_is_refused() -> None:
    with pytest.raises(StoreURLError, match="hash tag"):
        RedisStore.from_url("redis+cluster://127.0.0.1:7000?prefix=}oops")


def test_a_single_redis_keeps_the_key_names_it_always_had() -> None:
    """Runs paused before the upgrade are still found where they were saved."""
    keys = RedisKeys("hb:")
    assert [keys.run("r"), keys.due, keys.inbox, keys.audit] == [
        "hb:run:r",
        "hb:due",
        "hb:{inbox}:items",
        "hb:audit",
    ]


@pytest.mark.parametrize(
    ("url", "client_url"),
    [
        ("redis+cluster://127.0.0.1:7000", "redis://127.0.0.1:7000"),
        ("redis+cluster://127.0.0.1:7000/", "redis://127.0.0.1:7000"),
        ("redis+cluster://127.0.0.1:7000/0?prefix=a:", "redis://127.0.0.1:7000"),
        ("rediss+cluster://u:pw@db.example:7000?ssl_cert_reqs=none", None),
    ],
)
def test_a_cluster_url_is_read_as_a_plain_one_for_redis_py(
    url: str, client_url: str | None
) -> None:
    options = redis_options(url)
    assert options.cluster
    if client_url is None:
        assert options.client_url.startswith("rediss://u:pw@db.example:7000")
        assert "ssl_cert_reqs=none" in options.client_url
    else:
        assert options.client_url == client_url
    assert not redis_options("redis://127.0.0.1:6379/0").cluster


@pytest.mark.parametrize("path", ["/3", "/0/x", "/db"])
def test_a_cluster_url_with_a_database_number_is_refused(path: str) -> None:
    with pytest.raises(StoreURLError, match="no database number") as caught:
        RedisStore.from_url(f"redis+cluster://:hunter2@127.0.0.1:7000{path}?prefix=a:")
    assert "hunter2" not in str(caught.value)


def test_a_cluster_store_names_its_url_without_the_password() -> None:
    store = RedisStore.from_url("rediss+cluster://:hunter2@127.0.0.1:7000?prefix=a:")
    assert store.cluster
    assert "hunter2" not in repr(store)
    assert repr(store) == (
        "RedisStore('rediss+cluster://:***@127.0.0.1:7000?prefix=a:', prefix='a:', cluster=True)"
    )


_KEYLESS = frozenset({"TIME", "PUBLISH", "XREADGROUP", "XGROUP", "XINFO"})
"""Commands whose first argument is not a key (a subcommand or option comes first)."""


def test_no_script_builds_a_key_name() -> None:
    """Every key a script touches comes from KEYS: a cluster routes a script by them, and a
    script that built a key from a prefix would touch one it was not given."""
    store = RedisStore.from_url("redis://127.0.0.1:6379/0")
    scripts = [value.script for value in vars(store).values() if hasattr(value, "sha")]
    assert scripts
    # The key argument of every call: KEYS[...] or a variable holding one, never a string
    # built in the script (`..`) nor a literal.
    keyed = re.compile(r"redis\.call\(\s*'(\w+)'\s*,\s*([^,)]+)")
    for script in scripts:
        for command, key in keyed.findall(script):
            if command.upper() in _KEYLESS:
                continue
            assert ".." not in key and "'" not in key and '"' not in key, (command, key)


# Against the local cluster


async def test_one_store_on_the_cluster_serves_every_call(cluster_store_url: str) -> None:
    async with open_store(cluster_store_url) as store:
        assert isinstance(store, RedisStore) and store.cluster
        await store.save_run(make_run())
        await store.add_interactions([make_interaction("ix-1"), make_interaction("ix-2")])
        assert (await answer_only(store, "ix-1", answer=1, answered_by="U", now=time.time())).won
        assert (await store.close_interaction("ix-2", status="expired", now=time.time())).won
        assert await store.settled_runs() == ["run-1"]
        assert (await store.claim_run("run-1", child_id="child")).won
        assert await store.enqueue("event", {"n": 1}, dedupe="Ev1") is not None
        [item] = await store.take("worker-a")
        await store.done(item.item_id)
        assert await store.inbox_size() == 0


async def test_stores_of_two_prefixes_share_a_cluster_apart(
    redis_cluster: LocalCluster, cluster_store_url: str
) -> None:
    other = cluster_store_url + "-other"
    try:
        async with open_store(cluster_store_url) as one, open_store(other) as two:
            await one.save_run(make_run())
            await one.enqueue("event", {"n": 1})
            assert await two.load_run("run-1") is None
            assert await two.inbox_size() == 0
    finally:
        redis_cluster.drop(f"*{other.split('prefix=', 1)[1]}*")


async def test_a_cluster_that_is_unreachable_fails_at_open() -> None:
    with pytest.raises(StoreError, match="cannot reach Redis") as caught:
        async with open_store("redis+cluster://:hunter2@127.0.0.1:1?prefix=a:"):
            pass
    assert "hunter2" not in str(caught.value)


async def _connections_per_node(url: str, name: str) -> list[int]:
    raw = raw_client(url)
    assert isinstance(raw, aioredis.RedisCluster)
    try:
        lists = await raw.client_list(target_nodes=aioredis.RedisCluster.PRIMARIES)
    finally:
        await raw.aclose()
    return [
        sum(1 for c in clients if c.get("name") == name and c.get("cmd") != "cluster|slots")
        for clients in lists.values()
    ]


async def test_a_burst_past_the_pool_waits_on_a_cluster(cluster_store_url: str) -> None:
    """redis-py's cluster pools fail at once past `max_connections`; the store waits instead,
    with at most `pool_size` connections to each node."""
    name = f"hbtest-{uuid.uuid4().hex[:8]}"
    async with open_store(f"{cluster_store_url}&pool_size=2&client_name={name}") as store:
        await store.save_run(make_run())
        loads = [store.load_run("run-1") for _ in range(100)]
        enqueues = [store.enqueue("event", {"n": n}) for n in range(100)]
        results = await asyncio.gather(*loads, *enqueues)
        assert results[:100] == [make_run()] * 100
        assert None not in results[100:]
        assert await store.inbox_size() == 100
        # redis-py keeps the connection that read the topology (CLUSTER SLOTS) apart.
        assert max(await _connections_per_node(cluster_store_url, name)) <= 2


async def test_waiting_past_the_pool_timeout_is_a_store_error_on_a_cluster(
    cluster_store_url: str,
) -> None:
    async with open_store(f"{cluster_store_url}&pool_size=1&pool_timeout=0.05") as store:
        holding = asyncio.create_task(store.take("worker-a", block=5.0))
        await asyncio.sleep(0.05)
        try:
            with pytest.raises(StoreError, match="No connection available") as caught:
                await store.load_run("run-1")
            assert isinstance(caught.value.__cause__, aioredis.RedisError)
        finally:
            holding.cancel()
            with pytest.raises(asyncio.CancelledError):
                await holding
        assert await store.load_run("run-1") is None
