"""What every benchmark shares: a throwaway store of each kind, and percentiles."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import redis.asyncio as aioredis

__all__ = ["REDIS_URL", "per_call", "percentiles", "store_urls"]

REDIS_URL = os.environ.get("HANDBACK_TEST_REDIS", "redis://127.0.0.1:6379/0")


@asynccontextmanager
async def store_urls(redis_url: str = REDIS_URL) -> AsyncIterator[list[tuple[str, str]]]:
    """`[(label, url)]`: an SQLite file in a temporary directory, and Redis under a throwaway
    prefix whose keys are deleted afterwards."""
    prefix = f"hbbench-{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory() as tmp:
        try:
            yield [
                ("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}"),
                ("redis", f"{redis_url}?prefix={prefix}"),
            ]
        finally:
            client = aioredis.Redis.from_url(redis_url)
            try:
                keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
                for start in range(0, len(keys), 500):
                    await client.delete(*keys[start : start + 500])
            finally:
                await client.aclose()


def percentiles(values: list[float]) -> tuple[float, float]:
    """p50 and p95."""
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95)]


async def per_call(n: int, call: Callable[[int], Awaitable[object]]) -> float:
    """Microseconds per `call(i)`, the mean of `n` after a warm-up of up to 50."""
    for i in range(min(n, 50)):  # warm up connections, scripts and caches
        await call(n + i)
    start = time.perf_counter()
    for i in range(n):
        await call(i)
    return (time.perf_counter() - start) / n * 1e6
