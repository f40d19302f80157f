"""The audit log on both stores keeps the newest entries up to its cap."""

from __future__ import annotations

from state import (
    AUDIT_CAP,
    AuditEntry,
    Store,
)


async def test_the_audit_log_keeps_exactly_the_newest_cap_entries(store: Store) -> None:
    for n in range(AUDIT_CAP + 1):
        await store.audit(AuditEntry(at=float(n), action="answered"))
    everything = await store.recent_audit(limit=AUDIT_CAP * 2)
    assert len(everything) == AUDIT_CAP
    assert everything[0].at == float(AUDIT_CAP) and everything[-1].at == 1.0
    await store.audit(AuditEntry(at=-1.0, action="refused"))
    newest = await store.recent_audit(limit=2)
    assert [entry.at for entry in newest] == [-1.0, float(AUDIT_CAP)]
    assert len(await store.recent_audit(limit=AUDIT_CAP * 2)) == AUDIT_CAP
