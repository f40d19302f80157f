"""The Redis store's connection pool: bounded, and a burst past it waits instead of failing."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis.asyncio as aioredis

from state import RedisStore, StoreError, StoreURLError, open_store

from .conftest import make_run


def with_query(url: str, query: str) -> str:
    return f"{url}&{query}" if "?" in url else f"{url}?{query}"


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("pool_size=abc", "pool_size"),
        ("pool_size=0", "pool_size"),
        ("pool_size=-3", "pool_size"),
        ("pool_size=1.5", "pool_size"),
        ("pool_size=", "pool_size"),
        ("pool_size=2&pool_size=3", "pool_size"),
        ("pool_timeout=soon", "pool_timeout"),
        ("pool_timeout=0", "pool_timeout"),
        ("pool_timeout=-1", "pool_timeout"),
        ("pool_timeout=nan", "pool_timeout"),
        ("pool_timeout=inf", "pool_timeout"),
        ("max_connections=5", "pool_size"),
        ("timeout=5", "pool_timeout"),
    ],
)
def test_a_bad_pool_parameter_is_a_url_error_naming_it(query: str, name: str) -> None:
    url = f"redis://:hunter2@127.0.0.1:6379/0?prefix=a:&{query}"
    with pytest.raises(StoreURLError, match=f"`{name}`") as caught:
        RedisStore.from_url(url)
    assert "hunter2" not in str(caught.value)


async def test_pool_parameters_are_not_passed_on_to_redis_py(redis_store_url: str) -> None:
    """redis-py would hand an unknown query argument to every connection, which then fails."""
    url = with_query(redis_store_url, "pool_size=3&pool_timeout=2.5")
    async with open_store(url) as store:
        assert isinstance(store, RedisStore)
        assert store.prefix == redis_store_url.split("prefix=", 1)[1]
        await store.save_run(make_run())
        assert await store.load_run("run-1") == make_run()


def test_the_store_names_its_url_without_the_password() -> None:
    store = RedisStore.from_url("redis://:hunter2@127.0.0.1:6379/0?pool_size=3&prefix=a:")
    assert "hunter2" not in repr(store)
    assert "pool_size=3" in repr(store)


async def _connections_named(raw: aioredis.Redis, name: str) -> int:
    return sum(1 for client in await raw.client_list() if client.get("name") == name)


async def test_a_burst_past_the_pool_waits_for_a_connection(redis_store_url: str) -> None:
    """Two connections serve two hundred concurrent calls; redis-py's default pool would raise
    `MaxConnectionsError` past its limit instead."""
    name = f"hbtest-{uuid.uuid4().hex[:8]}"
    url = with_query(redis_store_url, f"pool_size=2&client_name={name}")
    raw = aioredis.Redis.from_url(redis_store_url.split("?", 1)[0])
    try:
        async with open_store(url) as store:
            await store.save_run(make_run())
            loads = [store.load_run("run-1") for _ in range(100)]
            enqueues = [store.enqueue("event", {"n": n}) for n in range(100)]
            results = await asyncio.gather(*loads, *enqueues)
            assert results[:100] == [make_run()] * 100
            assert None not in results[100:]
            assert await store.inbox_size() == 100
            assert await _connections_named(raw, name) == 2
    finally:
        await raw.aclose()


async def test_waiting_past_the_pool_timeout_is_a_store_error(redis_store_url: str) -> None:
    url = with_query(redis_store_url, "pool_size=1&pool_timeout=0.05")
    async with open_store(url) as store:
        # A blocking take holds the only connection while it waits.
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
