"""What every benchmark shares: a throwaway store of each kind, and percentiles."""

from __future__ import annotations

import os
import statistics
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import redis.asyncio as aioredis

__all__ = ["REDIS_URL", "percentiles", "store_urls"]

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
