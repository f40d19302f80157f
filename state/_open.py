"""`open_store(url)`: the one way the app turns a store URL into a `Store`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ._protocol import Store
from ._redis import RedisStore
from ._sqlite import SQLiteStore
from ._url import store_kind

__all__ = ["DEFAULT_STORE_URL", "STORE_ENV", "open_store", "store_from_url"]

STORE_ENV = "HANDBACK_STORE"
DEFAULT_STORE_URL = "sqlite:///handback.db"
"""An SQLite file in the working directory: nothing to install for a first run."""


def store_from_url(url: str) -> RedisStore | SQLiteStore:
    """A store for `url`, not yet entered; `StoreURLError` (a `ValueError`) for a bad URL."""
    if store_kind(url) == "redis":
        return RedisStore.from_url(url)
    return SQLiteStore.from_url(url)


@asynccontextmanager
async def open_store(url: str | None = None) -> AsyncIterator[Store]:
    """Open the store named by `url`, else `$HANDBACK_STORE`, else `sqlite:///handback.db`.

    `redis://`, `rediss://` and `unix://` open a `RedisStore` (a `?prefix=` query names its key
    namespace), and so do `redis+cluster://` and `rediss+cluster://`, on a Redis Cluster;
    `sqlite:///relative.db`, `sqlite:////absolute.db` and `sqlite:///:memory:` open
    an `SQLiteStore`. The store is closed when the block exits.
    """
    store = store_from_url(url or os.environ.get(STORE_ENV) or DEFAULT_STORE_URL)
    async with store:
        yield store
