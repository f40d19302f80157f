"""Threads and the audit log, against SQLite and Redis alike (de-duplicated deliveries are the
inbox's `enqueue(dedupe=...)`, tested in test_inbox.py)."""

from __future__ import annotations

import pytest

from state import AuditEntry, CorruptRecordError, RedisStore, SQLiteStore, Store

from .conftest import raw_client, raw_sqlite, redis_keys


async def test_a_thread_maps_to_its_last_run(store: Store) -> None:
    assert await store.get_thread_run("C1", "1.1") is None
    await store.set_thread_run("C1", "1.1", "run-1")
    await store.set_thread_run("C2", "1.1", "run-other")
    assert await store.get_thread_run("C1", "1.1") == "run-1"
    await store.set_thread_run("C1", "1.1", "run-2")
    assert await store.get_thread_run("C1", "1.1") == "run-2"
    assert await store.get_thread_run("C2", "1.1") == "run-other"
    assert await store.get_thread_run("C1", "1.2") is None


def entry(n: int) -> AuditEntry:
    return AuditEntry(
        at=1_700_000_000.5 + n,
        action="answered",
        interaction_id=f"ix-{n}",
        run_id="run-1",
        user="U1",
        detail=f"chose «{n}»",
    )


async def test_audit_reads_newest_first_with_a_limit(store: Store) -> None:
    assert await store.recent_audit() == []
    for n in range(5):
        await store.audit(entry(n))
    await store.audit(AuditEntry(at=2e9, action="expired"))

    recent = await store.recent_audit(limit=3)
    assert recent == [AuditEntry(at=2e9, action="expired"), entry(4), entry(3)]
    assert await store.recent_audit() == [AuditEntry(at=2e9, action="expired")] + [
        entry(n) for n in reversed(range(5))
    ]
    assert await store.recent_audit(limit=0) == []


async def test_a_corrupt_audit_entry_raises_an_error(store: Store, store_url: str) -> None:
    await store.audit(entry(1))
    if isinstance(store, RedisStore):
        client = raw_client(store_url)
        await client.lset(redis_keys(store).audit, 0, '{"at": "soon"}')
        await client.aclose()
    else:
        assert isinstance(store, SQLiteStore)
        with raw_sqlite(store_url) as conn:
            conn.execute('UPDATE audit SET rec = \'{"at": "soon"}\'')
        conn.close()
    with pytest.raises(CorruptRecordError, match="audit"):
        await store.recent_audit()


async def test_the_store_satisfies_the_protocol_and_closes_twice(store: Store) -> None:
    assert isinstance(store, Store)
    await store.aclose()
    await store.aclose()
