"""What an operator wants to know about a store before going live: where it is, whether it
exists, whether it takes writes, and (for Redis) whether it keeps data across a restart."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from ._errors import StoreError
from ._open import DEFAULT_STORE_URL, STORE_ENV
from ._protocol import ConversationStore
from ._redis import RedisStore
from ._url import mask_url, sqlite_path, store_kind

__all__ = ["StoreReport", "check_store", "missing_sqlite_file", "resolve_store_url"]

_PROBE_TTL = 10.0
"""Seconds the probe's thread lease lives if releasing it fails."""


def resolve_store_url(url: str | None) -> str:
    """The store URL `open_store(url)` would open: `url`, else `$HANDBACK_STORE`, else the
    default SQLite file."""
    return url or os.environ.get(STORE_ENV) or DEFAULT_STORE_URL


def missing_sqlite_file(url: str) -> str | None:
    """The path of an SQLite store whose file does not exist (opening it would create an empty
    one); None for any other store."""
    if store_kind(url) != "sqlite":
        return None
    path = sqlite_path(url)
    return None if path == ":memory:" or os.path.exists(path) else path


@dataclass(kw_only=True, frozen=True)
class StoreReport:
    """What `check_store` found; `problem` is None when the store can be used."""

    kind: str
    """`redis`, `redis cluster` or `sqlite`."""
    where: str
    """The URL without its password."""
    persistence: str | None = None
    """For Redis: which of RDB snapshots and AOF are on, or why that is unknown."""
    durable: bool = True
    """False when Redis keeps nothing across a restart (every paused run would be lost)."""
    problem: str | None = None


async def check_store(store: ConversationStore, url: str) -> StoreReport:
    """Write and remove a probe (a thread lease) and, for Redis, read its persistence."""
    kind = "sqlite"
    if isinstance(store, RedisStore):
        client = store._client
        kind = "redis cluster" if isinstance(client, aioredis.RedisCluster) else "redis"
    where = mask_url(url)
    probe = uuid.uuid4().hex
    try:
        if not await store.acquire_thread("handback-doctor", probe, owner=probe, ttl=_PROBE_TTL):
            return StoreReport(kind=kind, where=where, problem="a probe write was refused")
        await store.release_thread("handback-doctor", probe, owner=probe)
    except StoreError as error:
        return StoreReport(kind=kind, where=where, problem=str(error))
    if not isinstance(store, RedisStore) or not isinstance(store._client, aioredis.Redis):
        return StoreReport(kind=kind, where=where)  # a cluster's nodes each have their own
    persistence, durable = await _persistence(store._client)
    return StoreReport(kind=kind, where=where, persistence=persistence, durable=durable)


async def _persistence(client: aioredis.Redis) -> tuple[str, bool]:
    """Which persistence a single Redis has on; unknown (counted as durable) when the server
    will not say, as managed services that disable CONFIG do."""
    try:
        info = await client.info("persistence")
        aof = str(info.get("aof_enabled", "0")) == "1"
        saves = (await client.config_get("save")).get("save", "")
    except RedisError as error:
        return f"unknown ({type(error).__name__}: the server would not say)", True
    rdb = bool(str(saves).strip())
    if not aof and not rdb:
        return "off (no RDB snapshots, no AOF)", False
    parts = [f"RDB snapshots ({saves})" if rdb else "", "AOF" if aof else ""]
    return " and ".join(p for p in parts if p), True
