"""The suite's own check that no store a test used keeps a typed secret in its audit log
(`tests/conftest.py`: `TEST_SECRETS`, scanned when each store fixture is torn down) finds one
when there is one, on both stores."""

from __future__ import annotations

import time
from pathlib import Path

from state import AuditEntry, open_store

from .conftest import _redis_audit_leaks, _sqlite_audit_leaks


async def test_the_scan_finds_a_secret_in_either_store_s_audit(
    tmp_path: Path, redis_url: str
) -> None:
    path = tmp_path / "scan.db"
    redis_store = f"{redis_url}{'&' if '?' in redis_url else '?'}prefix=hbscan-{time.time_ns()}:"
    for url in (f"sqlite:///{path}", redis_store):
        async with open_store(url) as store:
            await store.audit(AuditEntry(at=time.time(), action="refused", detail="ran /deploy"))
            clean = (
                _sqlite_audit_leaks(path) if url.startswith("sqlite") else _redis_audit_leaks(url)
            )
            assert clean == []
            await store.audit(
                AuditEntry(at=time.time(), action="refused", detail="/deploy token=hunter2-x")
            )
            leaks = (
                _sqlite_audit_leaks(path) if url.startswith("sqlite") else _redis_audit_leaks(url)
            )
            assert len(leaks) == 1 and "hunter2-x" in leaks[0]
            if not url.startswith("sqlite"):
                # Planted here on purpose: removed so that nothing else trips over it.
                import redis

                client = redis.Redis.from_url(redis_url.split("?", 1)[0])
                for key in client.scan_iter(match=f"{url.split('prefix=', 1)[1]}*"):
                    client.delete(key)
                client.close()
