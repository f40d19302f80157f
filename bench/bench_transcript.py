"""Bytes a thread stores, for each store: `python bench/bench_transcript.py [MESSAGES...]`.

Builds threads of N messages (N/2 turns of a user message answered by the model, as
`bench/compare.py`'s bytes measure does) through `bot.Agent` and prints every byte the store
then holds against the size of the thread's transcript as JSON. Counted as the stored values:
on SQLite every column of every row; on Redis every hash field name and value, sorted-set
member (plus 8 bytes for its score) and string, with Redis's own `MEMORY USAGE` (key names and
allocator overhead included) beside. "layout 1" is what the same runs would store with the whole
transcript in each record, as every record did before layout 2.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from typing import Any

import pydantic_core
import redis.asyncio as aioredis
from _stores import REDIS_URL, store_urls

from bot import Agent
from bot.testing import FunctionModel
from state import RedisStore, RunRecord, SQLiteStore, Store, open_store
from state._codec import encode_run, inline
from state._url import sqlite_path

REPLY = "Noted. The orders database looks healthy: replication lag 0.2 s, disk 41 % used."


def prompt(n: int) -> str:
    return f"message {n}: please look at the orders database and tell me whether anything is off"


def reply(messages: list[dict[str, Any]]) -> str:
    return REPLY


async def thread(store: Store, messages: int) -> list[RunRecord]:
    agent = Agent(name="bench", model=FunctionModel(reply), store=store)
    last: str | None = None
    for n in range(messages // 2):
        last = (await agent(prompt=prompt(n), parent_id=last).collect()).run_id
    runs: list[RunRecord] = []
    while last is not None:
        run = await store.load_run(last)
        assert run is not None
        runs.insert(0, run)
        last = run.parent_id
    return runs


async def stored(store: Store, url: str) -> tuple[int, int | None]:
    """The payload bytes, and on Redis its `MEMORY USAGE` summed over the store's keys."""
    if isinstance(store, SQLiteStore):
        total = 0
        with sqlite3.connect(sqlite_path(url)) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master"
                    " WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for table in tables:
                columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
                size = " + ".join(f'COALESCE(LENGTH(CAST("{c}" AS BLOB)), 0)' for c in columns)
                (part,) = conn.execute(f'SELECT COALESCE(SUM({size}), 0) FROM "{table}"').fetchone()
                total += int(part)
        conn.close()
        return total, None
    assert isinstance(store, RedisStore)
    client = aioredis.Redis.from_url(REDIS_URL)
    payload = memory = 0
    try:
        async for key in client.scan_iter(match=f"{store.prefix}*"):
            memory += int(await client.memory_usage(key, samples=0) or 0)
            kind = (await client.type(key)).decode()
            if kind == "hash":
                payload += sum(len(k) + len(v) for k, v in (await client.hgetall(key)).items())
            elif kind == "zset":
                payload += sum(len(m) + 8 for m in await client.zrange(key, 0, -1))
            elif kind == "string":
                payload += int(await client.strlen(key))
            else:
                raise AssertionError(f"unexpected {kind} at {key!r}")
    finally:
        await client.aclose()
    return payload, memory


def layout1_bytes(runs: list[RunRecord]) -> int:
    """The records of these runs with the whole transcript inside, as before layout 2."""
    total = 0
    for run in runs:
        inline(run)
        total += len(encode_run(run))
    return total


async def measure(label: str, url: str, messages: int) -> str:
    async with open_store(url) as store:
        empty, empty_memory = await stored(store, url)
        runs = await thread(store, messages)
        payload, memory = await stored(store, url)
    transcript = len(pydantic_core.to_json(runs[-1].transcript))
    payload -= empty
    in_ram = f" ({memory - (empty_memory or 0):,} in RAM)" if memory is not None else ""
    return (
        f"| {label} | {messages} | {transcript:,} | {payload:,}{in_ram} | "
        f"{payload / transcript:.2f}x | {layout1_bytes(runs) / transcript:.1f}x |"
    )


async def main(sizes: list[int]) -> None:
    print("| store | messages | transcript JSON | bytes stored | × transcript | layout 1 × |")
    print("| --- | --- | --- | --- | --- | --- |")
    for messages in sizes:
        # A fresh store per thread, so each figure is that thread's alone.
        async with store_urls() as urls:
            for label, url in urls:
                print(await measure(label, url, messages))


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [2, 20, 200]))
