"""Opening a Redis Cluster store: redis-py's `RedisCluster`, and the bounded wait for a
connection that its per-node pools do not give."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import TypeVar

import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException

from ._errors import StoreURLError
from ._url import RedisOptions, mask_url

__all__ = ["CallGate", "RedisClient", "open_cluster"]

_T = TypeVar("_T")

RedisClient = aioredis.Redis | aioredis.RedisCluster
"""A single Redis or a Redis Cluster: the store's calls and scripts work on either."""


class CallGate:
    """At most `size` calls in flight; one more waits up to `timeout` seconds for a place.

    `RedisCluster` keeps a pool per node that fails at once when full (`MaxConnectionsError`)
    instead of waiting like the single-Redis `BlockingConnectionPool`. Bounding the calls in
    flight bounds the connections to every node by the same number, and gives a burst the same
    wait, then the same "No connection available" failure.
    """

    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self._places = asyncio.Semaphore(size)
        self._timeout = timeout

    async def run(self, call: Awaitable[_T]) -> _T:
        try:
            async with asyncio.timeout(self._timeout):
                await self._places.acquire()
        except TimeoutError:
            if isinstance(call, Coroutine):
                call.close()  # never started: no "coroutine was never awaited" warning
            raise aioredis.ConnectionError("No connection available.") from None
        try:
            return await call
        finally:
            self._places.release()


def open_cluster(url: str, options: RedisOptions) -> tuple[aioredis.RedisCluster, CallGate]:
    """A `RedisCluster` client for a `redis+cluster://` URL (not connected yet) and the gate
    that bounds its calls in flight by `pool_size`."""
    try:
        client = aioredis.RedisCluster.from_url(
            options.client_url, max_connections=options.pool_size
        )
    except (ValueError, RedisClusterException) as exc:
        raise StoreURLError(f"`{mask_url(url)}` is not a usable Redis Cluster URL: {exc}") from exc
    return client, CallGate(options.pool_size, options.pool_timeout)
