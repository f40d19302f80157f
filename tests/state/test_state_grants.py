"""Standing grants in the store: added once, found where they cover, revoked once, and an answer
under a grant taken only while it lasts; SQLite, a single Redis and a Redis Cluster alike."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from state import AuditEntry, Grant, GrantStore, Store

from .conftest import grant_id, make_grant, make_interaction, make_run, overwrite_raw

CHANNEL, THREAD, OTHER_THREAD = "C1", "1700000000.000100", "1700000000.000200"


def _grant(interaction_id: str = "ix-1", **fields: Any) -> Grant:
    return make_grant(
        interaction_id, **{"channel": CHANNEL, "thread_ts": THREAD, "run_id": "run-1", **fields}
    )


def _entry(action: Any = "granted", detail: str = "") -> AuditEntry:
    return AuditEntry(at=time.time(), action=action, user="U0BOB", detail=detail)


async def test_the_store_is_a_grant_store(store: Store) -> None:
    assert isinstance(store, GrantStore)


async def test_a_grant_is_added_once_with_its_audit_entry(store: Store) -> None:
    grant = _grant()
    assert await store.add_grant(grant, audit=_entry(detail="first"))
    # A retried click adds the same grant (same id): nothing changes, nothing is audited twice.
    later = replace(grant, expires_at=grant.expires_at + 999, granted_by="U0EVE")
    assert not await store.add_grant(later, audit=_entry(detail="second"))
    assert await store.get_grant(grant.grant_id) == grant
    assert [e.detail for e in await store.recent_audit()] == ["first"]


async def test_an_expired_grant_is_not_added(store: Store) -> None:
    now = time.time()
    grant = _grant(created_at=now, expires_at=now)
    assert not await store.add_grant(grant, audit=_entry())
    assert await store.get_grant(grant.grant_id) is None
    assert await store.recent_audit() == []


async def test_a_thread_grant_covers_its_thread_only(store: Store) -> None:
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    now = time.time()
    assert await store.covering_grants("deploy", channel=CHANNEL, thread_ts=THREAD, now=now) == [
        grant
    ]
    for tool, channel, thread in [
        ("deploy", CHANNEL, OTHER_THREAD),
        ("deploy", CHANNEL, None),
        ("deploy", "C2", THREAD),
        ("restart", CHANNEL, THREAD),
    ]:
        assert await store.covering_grants(tool, channel=channel, thread_ts=thread, now=now) == []


async def test_a_channel_grant_covers_every_thread_of_its_channel(store: Store) -> None:
    thread = _grant("ix-1")
    channel = _grant("ix-2", scope="channel", thread_ts=None, expires_at=time.time() + 7200)
    await store.add_grant(thread, audit=_entry())
    await store.add_grant(channel, audit=_entry())
    now = time.time()
    # The longest-lasting first.
    assert await store.covering_grants("deploy", channel=CHANNEL, thread_ts=THREAD, now=now) == [
        channel,
        thread,
    ]
    for where in (OTHER_THREAD, None):
        assert await store.covering_grants("deploy", channel=CHANNEL, thread_ts=where, now=now) == [
            channel
        ]
    assert await store.covering_grants("deploy", channel="C2", thread_ts=THREAD, now=now) == []


async def test_a_grant_ends_at_its_expiry(store: Store) -> None:
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    late = grant.expires_at
    assert await store.covering_grants("deploy", channel=CHANNEL, thread_ts=THREAD, now=late) == []
    assert await store.active_grants(now=late) == []
    assert await store.active_grants(now=late - 1) == [grant]
    # Still readable (a late revoke says "expired"), and not revocable any more.
    claim = await store.revoke_grant(grant.grant_id, by="U0BOB", now=late, audit=_entry("revoked"))
    assert not claim.won and claim.grant == grant


async def test_active_grants_are_listed_soonest_first_and_by_who_gave_them(store: Store) -> None:
    now = time.time()
    bob = _grant("ix-1", expires_at=now + 600)
    carol = _grant("ix-2", granted_by="U0CAROL", expires_at=now + 300)
    bob_channel = _grant(
        "ix-3", scope="channel", thread_ts=None, channel="C2", expires_at=now + 900
    )
    for grant in (bob, carol, bob_channel):
        await store.add_grant(grant, audit=_entry())
    assert await store.active_grants(now=now) == [carol, bob, bob_channel]
    assert await store.active_grants(now=now, granted_by="U0BOB") == [bob, bob_channel]
    assert await store.active_grants(now=now, limit=1) == [carol]
    assert await store.active_grants(now=now, limit=0) == []


async def test_a_revoke_wins_once_and_ends_the_grant(store: Store) -> None:
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    now = time.time()
    claims = await asyncio.gather(
        *(
            store.revoke_grant(
                grant.grant_id, by=f"U0N{n}", now=now, audit=_entry("revoked", str(n))
            )
            for n in range(10)
        )
    )
    won = [c for c in claims if c.won]
    assert len(won) == 1
    revoked = won[0].grant
    assert revoked is not None and revoked.revoked_at == now and revoked.revoked_by is not None
    assert all(c.grant == revoked for c in claims)
    assert await store.get_grant(grant.grant_id) == revoked
    assert await store.covering_grants("deploy", channel=CHANNEL, thread_ts=THREAD, now=now) == []
    assert await store.active_grants(now=now) == []
    assert [e.action for e in await store.recent_audit()] == ["revoked", "granted"]
    # A retried click does not bring a revoked grant back.
    assert not await store.add_grant(grant, audit=_entry())
    assert (await store.get_grant(grant.grant_id)) == revoked


async def test_revoking_an_unknown_grant_is_a_lost_claim(store: Store) -> None:
    claim = await store.revoke_grant("grant_nope", by="U0BOB", now=time.time(), audit=_entry())
    assert not claim.won and claim.grant is None
    assert await store.recent_audit() == []


async def _pending(store: Store, interaction_id: str = "ix-9") -> None:
    await store.save_run(make_run("run-9"))
    await store.add_interactions(
        [make_interaction(interaction_id, "run-9", kind="approval", payload={"tool": "deploy"})]
    )


async def test_an_answer_under_an_active_grant_is_taken_with_its_audit(store: Store) -> None:
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    await _pending(store)
    answer = {"approved": True, "grant": grant.grant_id}
    claim = await store.answer_under_grant(
        "ix-9",
        grant_id=grant.grant_id,
        answer=answer,
        answered_by="U0BOB",
        now=time.time(),
        audit=_entry("answered", "under grant"),
    )
    assert claim.won and claim.record is not None
    assert (claim.record.status, claim.record.answer, claim.record.answered_by) == (
        "answered",
        answer,
        "U0BOB",
    )
    assert (await store.recent_audit())[0].detail == "under grant"
    # Answered: the run waits for nothing more, so recovery finds it.
    assert await store.settled_runs() == ["run-9"]
    again = await store.answer_under_grant(
        "ix-9",
        grant_id=grant.grant_id,
        answer=answer,
        answered_by="U0BOB",
        now=time.time(),
        audit=_entry("answered"),
    )
    assert not again.won


@pytest.mark.parametrize("how", ["revoked", "expired", "unknown"])
async def test_no_answer_under_a_grant_that_does_not_last(store: Store, how: str) -> None:
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    await _pending(store)
    now = time.time()
    grant_id = grant.grant_id
    if how == "revoked":
        await store.revoke_grant(grant_id, by="U0BOB", now=now, audit=_entry("revoked"))
    elif how == "expired":
        now = grant.expires_at
    else:
        grant_id = "grant_nope"
    claim = await store.answer_under_grant(
        "ix-9",
        grant_id=grant_id,
        answer={"approved": True, "grant": grant_id},
        answered_by="U0BOB",
        now=now,
        audit=_entry("answered"),
    )
    assert not claim.won and claim.record is not None and claim.record.status == "pending"
    assert "answered" not in [e.action for e in await store.recent_audit()]


async def test_a_revoke_and_answers_under_the_grant_race_cleanly(store: Store) -> None:
    """Once the revoke has won, no answer under the grant is taken: every answer that won was
    taken before it (Redis and SQLite order them)."""
    grant = _grant()
    await store.add_grant(grant, audit=_entry())
    await store.save_run(make_run("run-9"))
    ids = [f"ix-r{n}" for n in range(12)]
    await store.add_interactions(
        [make_interaction(i, "run-9", kind="approval", payload={"tool": "deploy"}) for i in ids]
    )
    now = time.time()

    async def answer(interaction_id: str) -> bool:
        claim = await store.answer_under_grant(
            interaction_id,
            grant_id=grant.grant_id,
            answer={"approved": True, "grant": grant.grant_id},
            answered_by="U0BOB",
            now=now,
            audit=_entry("answered", interaction_id),
        )
        return claim.won

    revoke = store.revoke_grant(grant.grant_id, by="U0BOB", now=now, audit=_entry("revoked"))
    results = await asyncio.gather(
        *(answer(i) for i in ids[:6]), revoke, *(answer(i) for i in ids[6:])
    )
    audit = [e for e in reversed(await store.recent_audit()) if e.action != "granted"]
    revoked_at = [e.action for e in audit].index("revoked")
    # Every audited answer came before the revoke; what came after it was refused.
    assert all(e.action == "answered" for e in audit[:revoked_at])
    assert audit[revoked_at + 1 :] == []
    assert sum(bool(r) for r in results if isinstance(r, bool)) == revoked_at


OLD_GRANT = Path(__file__).parent / "fixtures" / "grant_before_binding.json"
"""A grant as the code before bounds wrote it: a bare tool name, no path, no requesters."""


async def test_a_grant_stored_before_bounds_reads_back_needing_renewal(
    store: Store, store_url: str
) -> None:
    data = json.loads(OLD_GRANT.read_text())
    now = time.time()
    data.update(created_at=now, expires_at=now + 3600, thread_ts=THREAD, channel=CHANNEL)
    data["grant_id"] = grant_id("int_old")
    today = _grant(**data)  # the same grant with today's fields, for the store's indexes
    assert await store.add_grant(today, audit=_entry())
    await overwrite_raw(store, store_url, "grants", today.grant_id, json.dumps(data))
    old = await store.get_grant(today.grant_id)
    assert old is not None and old.needs_renewal
    assert (old.path, old.requesters, old.arguments) == (None, (), {})
    # Still found and listed (so it can be said to need renewal), and still revocable.
    [found] = await store.covering_grants("deploy", channel=CHANNEL, thread_ts=THREAD, now=now)
    assert found == old
    assert await store.active_grants(now=now) == [old]
    record = make_interaction(
        kind="approval",
        payload={"tool": "deploy", "arguments": {}},
        channel=CHANNEL,
        thread_ts=THREAD,
        requester="U0ALICE",
        runnable_path="granter.deploy",
    )
    assert old.mismatch(record) is not None
    assert (await store.revoke_grant(old.grant_id, by="ops", now=now, audit=_entry("revoked"))).won


def test_a_grant_covers_only_the_path_place_requesters_and_pinned_values() -> None:
    grant = _grant(arguments={"environment": "staging"}, requesters=("U0ALICE", "U0DAVE"))
    base = make_interaction(
        kind="approval",
        payload={"tool": "deploy", "arguments": {"environment": "staging", "service": "api"}},
        channel=CHANNEL,
        thread_ts=THREAD,
        requester="U0ALICE",
        requesters=["U0ALICE"],
        runnable_path="granter.deploy",
    )
    assert grant.mismatch(base) is None
    assert grant.mismatch(replace(base, requester="U0DAVE", requesters=["U0DAVE"])) is None
    refused = {
        "nested tool": replace(base, runnable_path="granter.fleet.deploy"),
        "other thread": replace(base, thread_ts=OTHER_THREAD),
        "other channel": replace(base, channel="C2"),
        "other requester": replace(base, requester="U0EVE", requesters=["U0EVE"]),
        "shaped by another": replace(base, requesters=["U0ALICE", "U0EVE"]),
        "no requester": replace(base, requester=None),
        "other value": replace(
            base, payload={"tool": "deploy", "arguments": {"environment": "production"}}
        ),
        "value missing": replace(base, payload={"tool": "deploy", "arguments": {}}),
        "other tool name": replace(base, payload={**base.payload, "tool": "wipe"}),
    }
    for what, record in refused.items():
        assert grant.mismatch(record) is not None, what
