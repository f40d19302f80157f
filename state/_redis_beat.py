"""The heartbeat on Redis: a synchronous client of its own (the beating thread has no event
loop of the store's) and one script that renews what the process holds."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException

from ._beat import Held, Lost, check_held
from ._errors import StoreError, UsageError
from ._inbox import millis
from ._keys import INBOX_GROUP, RedisKeys
from ._redis_cluster import RedisClient
from ._url import redis_options

__all__ = ["RedisHeartbeat", "sync_client"]

# KEYS: the stream, then one thread lease per thread held; ARGV: the group, the consumer, the
# TTL in ms, how many items, the items' ids, then each lease's owner. An item is renewed as
# `extend` renews it (XCLAIM JUSTID sets its idle time back to 0, only while it is pending for
# this consumer); a lease only while its owner holds it, so a beat that comes after a release
# never takes the thread again. XAUTOCLAIM by the idle time is also what processes of the
# release before this one take by (with their 5 s lease), so during a rolling upgrade neither
# takes the other's live items as long as beats come more often than every 5 s.
_BEAT = """
redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '0', 'MKSTREAM')
local group, consumer, ttl, n = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local lost_items, lost_threads = {}, {}
for i = 5, 4 + n do
  local p = redis.call('XPENDING', KEYS[1], group, ARGV[i], ARGV[i], 1, consumer)
  if #p == 0 or #redis.call('XCLAIM', KEYS[1], group, consumer, 0, ARGV[i], 'JUSTID') == 0 then
    lost_items[#lost_items + 1] = ARGV[i]
  end
end
for k = 2, #KEYS do
  if redis.call('GET', KEYS[k]) == ARGV[3 + n + k] then
    redis.call('PEXPIRE', KEYS[k], ttl)
  else
    lost_threads[#lost_threads + 1] = k - 1
  end
end
return {lost_items, lost_threads}
"""

_SOCKET_TIMEOUT = 5.0
"""Seconds a beat waits for Redis before it fails (and the next one tries again)."""


class RedisHeartbeat:
    """`Heartbeat` on Redis."""

    def __init__(self, client: redis.Redis | redis.RedisCluster, keys: RedisKeys) -> None:
        self._client = client
        self._keys = keys
        self._script = client.register_script(_BEAT)
        self._closed = False

    def beat(self, held: Held, *, ttl: float) -> Lost:
        seconds = check_held(held, ttl)
        items = list(dict.fromkeys(held.items))
        keys = [self._keys.inbox]
        args: list[str | int] = [INBOX_GROUP, held.consumer, millis(seconds), len(items), *items]
        for lease in held.threads:
            keys.append(self._keys.thread_lease(lease.channel, lease.thread_ts))
            args.append(lease.owner)
        try:
            lost_items, lost_threads = self._script(keys=keys, args=args)
        except (redis.RedisError, RedisClusterException) as exc:
            raise StoreError(f"the heartbeat could not reach Redis: {exc}") from exc
        return Lost(
            items=tuple(_text(item) for item in lost_items),
            threads=tuple(held.threads[int(index) - 1] for index in lost_threads),
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()


def sync_client(
    client: RedisClient, url: str | None, *, timeout: float = _SOCKET_TIMEOUT
) -> redis.Redis | redis.RedisCluster:
    """A synchronous client to the server `client` talks to: from the store's URL when it was
    opened from one, else from the single Redis client's connection settings; `timeout` seconds
    for a connection and for each reply."""
    timeouts: dict[str, Any] = {"socket_timeout": timeout, "socket_connect_timeout": timeout}
    if url is not None:
        options = redis_options(url)
        if options.cluster:
            return redis.RedisCluster.from_url(options.client_url, **timeouts)
        return redis.Redis.from_url(options.client_url, **timeouts)
    if isinstance(client, aioredis.RedisCluster):
        raise UsageError("a heartbeat on a Redis Cluster needs a store opened with `from_url`")
    pool = client.connection_pool
    settings = pool.connection_kwargs
    common: dict[str, Any] = {
        "db": settings.get("db", 0),
        "username": settings.get("username"),
        "password": settings.get("password"),
        **timeouts,
    }
    if "path" in settings:
        return redis.Redis(unix_socket_path=settings["path"], **common)
    return redis.Redis(
        host=settings.get("host", "localhost"),
        port=settings.get("port", 6379),
        ssl=issubclass(pool.connection_class, aioredis.SSLConnection),
        **common,
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
