"""Votes taken back before a run resumes with them (the two-person rule checked again at resume):
`withdraw_vote` for a pending interaction, `withdraw_answer(voters=...)` for an answered one, each
with its audit entries in the same atomic step, on every store kind."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING

import pytest

from state import AuditEntry, Store, open_store

from ..conftest import answer_only
from .conftest import make_interaction, make_run

if TYPE_CHECKING:
    # The claim is a coordination record; its type comes with the helper that makes one.
    from ..conftest import AnswerClaim

APPROVE = {"approved": True}
NOW = 1_700_000_000.123456789
"""A time with more digits than Lua's cjson keeps: a kept vote must read back unrounded."""


def _withdrawn(user: str, detail: str = "no longer on the approvers list") -> AuditEntry:
    return AuditEntry(
        at=time.time(),
        action="withdrawn",
        interaction_id="ix-1",
        run_id="run-1",
        user=user,
        detail=detail,
    )


async def _approval(store: Store, count: int = 2) -> None:
    await store.save_run(make_run("run-1"))
    record = make_interaction(
        "ix-1",
        "run-1",
        kind="approval",
        payload={"tool": "deploy", "rule": {"count": count}},
        expires_at=NOW + 3600,
    )
    await store.add_interactions([record])


async def _vote(store: Store, user: str, *, needed: int = 2, at: float = NOW) -> None:
    entries = [
        AuditEntry(at=at, action="answered", interaction_id="ix-1", user=user, detail=f"{k}")
        for k in range(1, needed + 1)
    ]
    claim = await store.answer_and_claim(
        "ix-1", answer=APPROVE, answered_by=user, now=at, audit=entries, needed=needed
    )
    assert claim.won


async def _withdrawals(store: Store) -> list[tuple[str | None, str]]:
    return [(e.user, e.detail) for e in await store.recent_audit() if e.action == "withdrawn"]


# ------------------------------------------------------------------ withdraw_vote


async def test_a_vote_is_withdrawn_from_a_pending_interaction(store: Store) -> None:
    await _approval(store, count=3)
    await _vote(store, "UBOB", needed=3)
    await _vote(store, "UCAROL", needed=3, at=NOW + 1)
    claim = await store.withdraw_vote("ix-1", user="UBOB", audit=_withdrawn("UBOB"))
    assert claim.won and claim.record is not None
    assert claim.record.status == "pending"
    assert [(v.user, v.at) for v in claim.record.votes] == [("UCAROL", NOW + 1)]
    stored = await store.get_interaction("ix-1")
    assert stored is not None and stored.votes == claim.record.votes
    assert await _withdrawals(store) == [("UBOB", "no longer on the approvers list")]
    # Counted as what it now is: two more votes are needed, and bob's is one of them again.
    await _vote(store, "UBOB", needed=3, at=NOW + 2)
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "pending"
    await _vote(store, "UDAVE", needed=3, at=NOW + 3)
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "answered"
    assert record.answer["approvers"] == ["UCAROL", "UBOB", "UDAVE"]


async def test_the_only_vote_withdrawn_leaves_none(store: Store) -> None:
    await _approval(store)
    await _vote(store, "UBOB")
    claim = await store.withdraw_vote("ix-1", user="UBOB", audit=_withdrawn("UBOB"))
    assert claim.won and claim.record is not None and claim.record.votes == []
    await _vote(store, "UCAROL")
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "pending"
    assert [v.user for v in record.votes] == ["UCAROL"]


async def test_withdrawing_a_vote_that_is_not_there_loses(store: Store) -> None:
    assert not (await store.withdraw_vote("ix-1", user="UBOB", audit=_withdrawn("UBOB"))).won
    await _approval(store)
    none_yet = await store.withdraw_vote("ix-1", user="UBOB", audit=_withdrawn("UBOB"))
    assert not none_yet.won and none_yet.record is not None
    await _vote(store, "UBOB")
    other = await store.withdraw_vote("ix-1", user="UCAROL", audit=_withdrawn("UCAROL"))
    assert not other.won and other.record is not None
    assert [v.user for v in other.record.votes] == ["UBOB"]
    # Answered: the vote is part of the answer now, taken back only by `withdraw_answer`.
    await _vote(store, "UCAROL", at=NOW + 1)
    answered = await store.withdraw_vote("ix-1", user="UBOB", audit=_withdrawn("UBOB"))
    assert not answered.won and answered.record is not None
    assert answered.record.status == "answered"
    assert [v.user for v in answered.record.votes] == ["UBOB", "UCAROL"]
    assert await _withdrawals(store) == []


async def test_a_withdrawal_racing_votes_is_atomic(store: Store, store_url: str) -> None:
    """Bob's vote withdrawn while carol votes from another connection: either the withdrawal
    comes first and carol's vote is the only one, or carol's answers it with bob's (for the
    resume's check to take back); never an answer without bob's vote counted twice or lost."""
    wins = 0
    async with open_store(store_url) as second:
        for attempt in range(5):
            ix, run_id = f"ix-{attempt}", f"run-{attempt}"
            await store.save_run(make_run(run_id))
            payload = {"tool": "deploy", "rule": {"count": 2}}
            await store.add_interactions(
                [make_interaction(ix, run_id, kind="approval", payload=payload)]
            )

            def vote(on: Store, user: str, ix: str = ix) -> Awaitable[AnswerClaim]:
                return on.answer_and_claim(
                    ix,
                    answer=APPROVE,
                    answered_by=user,
                    now=time.time(),
                    audit=[AuditEntry(at=NOW, action="answered")] * 2,
                    needed=2,
                )

            assert (await vote(store, "UBOB")).won
            withdrawn, carol = await asyncio.gather(
                store.withdraw_vote(ix, user="UBOB", audit=_withdrawn("UBOB")),
                vote(second, "UCAROL"),
            )
            record = await store.get_interaction(ix)
            assert record is not None and carol.won
            if withdrawn.won:
                wins += 1
                assert record.status == "pending"
                assert [v.user for v in record.votes] == ["UCAROL"]
            else:
                assert record.status == "answered"
                assert record.answer["approvers"] == ["UBOB", "UCAROL"]
    # Audited exactly when it won, in the same step.
    assert len(await _withdrawals(store)) == wins


# ------------------------------------------------- withdraw_answer of several votes


async def _answered_by_two(store: Store) -> None:
    await _approval(store)
    await _vote(store, "UBOB")
    await _vote(store, "UCAROL", at=NOW + 1)


async def test_withdrawing_an_earlier_voter_reopens_with_the_remaining_vote(store: Store) -> None:
    await _answered_by_two(store)
    claim = await store.withdraw_answer(
        "ix-1",
        answered_by="UCAROL",
        run_id="run-1",
        voters=["UBOB"],
        audit=[_withdrawn("UBOB")],
    )
    assert claim.won and claim.record is not None
    record = claim.record
    assert (record.status, record.answer, record.answered_by) == ("pending", None, None)
    assert [(v.user, v.at) for v in record.votes] == [("UCAROL", NOW + 1)]
    assert await _withdrawals(store) == [("UBOB", "no longer on the approvers list")]
    assert await store.pending_count() == 1
    assert await store.settled_runs() == []
    # One vote in: dave's is the second, and answers it with carol's.
    await _vote(store, "UDAVE", at=NOW + 2)
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "answered"
    assert record.answer["approvers"] == ["UCAROL", "UDAVE"]


async def test_withdrawing_the_last_voter_or_both(store: Store) -> None:
    await _answered_by_two(store)
    # By default the approver the answer names: carol, whose vote was the last.
    claim = await store.withdraw_answer(
        "ix-1", answered_by="UCAROL", run_id="run-1", audit=_withdrawn("UCAROL")
    )
    assert claim.won and claim.record is not None
    assert [v.user for v in claim.record.votes] == ["UBOB"]
    await _vote(store, "UCAROL", at=NOW + 2)
    both = await store.withdraw_answer(
        "ix-1",
        answered_by="UCAROL",
        run_id="run-1",
        voters=["UBOB", "UCAROL"],
        audit=[_withdrawn("UBOB"), _withdrawn("UCAROL", "its approval rule cannot be read")],
    )
    assert both.won and both.record is not None
    assert (both.record.status, both.record.votes) == ("pending", [])
    assert await _withdrawals(store) == [
        ("UCAROL", "its approval rule cannot be read"),
        ("UBOB", "no longer on the approvers list"),
        ("UCAROL", "no longer on the approvers list"),
    ]


async def test_a_voter_without_a_vote_loses_and_changes_nothing(store: Store) -> None:
    await _answered_by_two(store)
    for voters in (["UDAVE"], ["UBOB", "UDAVE"]):
        claim = await store.withdraw_answer(
            "ix-1",
            answered_by="UCAROL",
            run_id="run-1",
            voters=voters,
            audit=[_withdrawn(voter) for voter in voters],
        )
        assert not claim.won and claim.record is not None
        assert claim.record.status == "answered"
        assert [v.user for v in claim.record.votes] == ["UBOB", "UCAROL"]
    # Not the approver the answer names, or not that run's: lost as before.
    assert not (
        await store.withdraw_answer(
            "ix-1", answered_by="UBOB", run_id="run-1", voters=["UBOB"], audit=_withdrawn("UBOB")
        )
    ).won
    assert await _withdrawals(store) == []


async def test_votes_the_run_resumed_with_are_final(store: Store) -> None:
    await _answered_by_two(store)
    assert (await store.claim_run("run-1", child_id="run-child")).won
    claim = await store.withdraw_answer(
        "ix-1", answered_by="UCAROL", run_id="run-1", voters=["UBOB"], audit=_withdrawn("UBOB")
    )
    assert not claim.won and claim.record is not None
    assert [v.user for v in claim.record.votes] == ["UBOB", "UCAROL"]
    assert await _withdrawals(store) == []


async def test_a_single_approver_answer_is_withdrawn_only_for_its_approver(store: Store) -> None:
    await store.save_run(make_run("run-1"))
    await store.add_interactions([make_interaction("ix-1", "run-1", kind="approval")])
    claim = await answer_only(store, "ix-1", answer=True, answered_by="UBOB", now=NOW)
    assert claim.won
    other = await store.withdraw_answer(
        "ix-1", answered_by="UBOB", run_id="run-1", voters=["UCAROL"], audit=_withdrawn("UCAROL")
    )
    assert not other.won
    own = await store.withdraw_answer(
        "ix-1", answered_by="UBOB", run_id="run-1", voters=["UBOB"], audit=_withdrawn("UBOB")
    )
    assert own.won and own.record is not None and own.record.status == "pending"


@pytest.mark.parametrize(
    ("voters", "entries"),
    [([], 0), (["UBOB", "UBOB"], 2), (["UBOB"], 2), (["UBOB", "UCAROL"], 1)],
)
async def test_voters_need_one_audit_entry_each(
    store: Store, voters: list[str], entries: int
) -> None:
    await _answered_by_two(store)
    with pytest.raises(ValueError, match=r"voters|audit entries"):
        await store.withdraw_answer(
            "ix-1",
            answered_by="UCAROL",
            run_id="run-1",
            voters=voters,
            audit=[_withdrawn("UBOB")] * entries,
        )
    record = await store.get_interaction("ix-1")
    assert record is not None and record.status == "answered"
