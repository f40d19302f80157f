"""Record factories and raw access to what a store wrote, for the state tests."""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import redis.asyncio as aioredis

from state import InteractionRecord, RedisStore, RunRecord, SQLiteStore, Store
from state._keys import RedisKeys
from state._url import sqlite_path


def make_run(run_id: str = "run-1", **fields: Any) -> RunRecord:
    values: dict[str, Any] = {
        "parent_id": None,
        "agent_name": "ops",
        "status": "paused",
        "reason": "input_required",
    }
    values.update(fields)
    return RunRecord(run_id=run_id, **values)


def make_interaction(
    interaction_id: str = "ix-1", run_id: str = "run-1", **fields: Any
) -> InteractionRecord:
    now = time.time()
    values: dict[str, Any] = {
        "kind": "ask_user",
        "payload": {"question": "Which database?", "options": ["postgres", "sqlite"]},
        "channel": "C1",
        "thread_ts": "1700000000.000100",
        "created_at": now,
        "expires_at": now + 3600,
    }
    values.update(fields)
    return InteractionRecord(interaction_id=interaction_id, run_id=run_id, **values)


async def overwrite_raw(store: Store, url: str, table: str, ident: str, raw: str) -> str:
    """Replace the stored JSON of one run (`runs`) or interaction (`interactions`) with `raw`.

    Returns the key or row name the store should report in its error.
    """
    if isinstance(store, RedisStore):
        keys = RedisKeys(store.prefix)
        key = keys.run(ident) if table == "runs" else keys.interaction(ident)
        client = aioredis.Redis.from_url(url.split("?", 1)[0])
        try:
            await client.hset(key, "rec", raw)
        finally:
            await client.aclose()
        return key
    assert isinstance(store, SQLiteStore)
    column = "run_id" if table == "runs" else "interaction_id"
    with sqlite3.connect(sqlite_path(url)) as conn:
        conn.execute(f"UPDATE {table} SET rec = ? WHERE {column} = ?", (raw, ident))
    conn.close()
    return f"{table}/{ident}"
