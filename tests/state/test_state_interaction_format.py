"""How an interaction record is stored: without the fields at their default, and records
written before it carried the whole pending interaction (`fixtures/`, as that code wrote them:
every field spelled out, no `runnable_*` or `t0`) still read back, answer and render."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

from blocks import render, render_card
from state import InteractionRecord, PendingInteraction, Store

from ..blocks._slack import check_message
from ..conftest import answer_only, interaction_of
from .conftest import make_interaction, overwrite_raw, read_raw

FIXTURE = Path(__file__).parent / "fixtures" / "interaction_before_pending_fields.json"
ADDED = {"runnable_path", "runnable_name", "runnable_type", "t0"}
"""The interaction's fields that records did not keep before."""


def _old() -> tuple[str, dict[str, Any]]:
    raw = FIXTURE.read_text().strip()
    return raw, json.loads(raw)


def test_the_fixture_is_the_format_of_before() -> None:
    _, data = _old()
    assert not ADDED & set(data)
    assert set(data) <= {f.name for f in fields(InteractionRecord)} - ADDED
    # Every field spelled out, those at their default too.
    assert (data["status"], data["answer"], data["votes"]) == ("pending", None, [])


async def test_an_old_record_reads_back_answers_and_renders(store: Store, store_url: str) -> None:
    raw, data = _old()
    iid = data["interaction_id"]
    # Added by today's store (its indexes and overlay), then its JSON swapped for the old bytes.
    await store.add_interactions([InteractionRecord(**data)])
    await overwrite_raw(store, store_url, "interactions", iid, raw)
    record = await store.get_interaction(iid)
    assert record == InteractionRecord(**data)
    assert (record.runnable_path, record.runnable_name, record.runnable_type, record.t0) == (
        "",
        "",
        "Tool",
        0,
    )
    card = render_card(record)
    check_message(card)
    assert "deploy" in card["text"]

    # `now` is the record's time, not the clock's: the fixture's expiry is a fixed date.
    claim = await answer_only(
        store, iid, answer=True, answered_by="U0BOB", now=data["created_at"] + 60
    )
    assert claim.won and claim.record is not None
    assert (claim.record.status, claim.record.answer, claim.record.answered_by) == (
        "answered",
        True,
        "U0BOB",
    )
    assert interaction_of(claim.record) == interaction_of(record)
    check_message(render(claim.record))


async def test_a_record_is_stored_without_its_defaults(store: Store, store_url: str) -> None:
    old, data = _old()
    pending = PendingInteraction(
        **{k: v for k, v in data.items() if k in {f.name for f in fields(PendingInteraction)}},
        runnable_path="assistant.deploy",
        runnable_name="deploy",
        t0=1_796_048_791_476,
    )
    record = InteractionRecord.placed(
        pending,
        run_id=data["run_id"],
        channel=data["channel"],
        thread_ts=data["thread_ts"],
        requester=data["requester"],
        requesters=data["requesters"],
        created_at=data["created_at"],
        expires_at=data["expires_at"],
    )
    await store.add_interactions([record])
    stored = json.loads(await read_raw(store, store_url, record.interaction_id))
    assert stored["runnable_path"] == "assistant.deploy" and stored["t0"] == 1_796_048_791_476
    assert not {"runnable_type", "status", "answer", "message_ts", "votes"} & set(stored)
    # The same question with the interaction's fields added takes fewer bytes than before.
    assert len(json.dumps(stored, separators=(",", ":"))) < len(old)
    assert await store.get_interaction(record.interaction_id) == record


async def test_a_record_with_fields_off_their_default_keeps_them(store: Store) -> None:
    record = make_interaction(
        "ix-1",
        status="answered",
        answer=False,
        answered_by="U1",
        answered_at=1_700_000_100.0,
        message_ts="1700000001.000200",
        runnable_type="Agent",
        requester="U2",
        requesters=["U2"],
    )
    await store.add_interactions([record])
    assert await store.get_interaction("ix-1") == record
