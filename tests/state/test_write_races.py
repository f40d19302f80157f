"""Writes racing each other on both stores: a save never clears a claim, a close and an
answer have one winner, a re-add never resets an answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

from state import (
    InteractionRecord,
    Store,
)

from ..conftest import answer_only
from .conftest import make_interaction, make_run


def answered(claim_record: InteractionRecord | None) -> InteractionRecord:
    assert claim_record is not None
    return claim_record


async def test_a_save_racing_a_claim_never_clears_the_claim(store: Store) -> None:
    """The runtime saves the parent again while a click claims it: the claim stays final."""
    for n in range(20):
        run_id = f"run-{n}"
        await store.save_run(make_run(run_id))
        save = store.save_run(make_run(run_id, answers={"ix": n}))
        claim = store.claim_run(run_id, child_id=f"child-{n}")
        if n % 2:
            _, won = await asyncio.gather(save, claim)
        else:
            won, _ = await asyncio.gather(claim, save)
        assert won.won
        stored = await store.load_run(run_id)
        assert stored is not None and stored.resumed_by == f"child-{n}"
        assert stored.answers == {"ix": n}
        assert not (await store.claim_run(run_id, child_id="late")).won


async def test_a_close_racing_an_answer_has_one_winner_and_its_outcome(store: Store) -> None:
    records = [make_interaction(f"ix-{n}") for n in range(20)]
    await store.add_interactions(records)
    now = time.time()
    for n in range(20):
        ix = f"ix-{n}"
        attempts: list[Awaitable[Any]] = [
            answer_only(store, ix, answer=n, answered_by="U1", now=now),
            store.close_interaction(ix, status="superseded", now=now),
        ]
        if n % 2:
            attempts.reverse()
        claims = await asyncio.gather(*attempts)
        assert sum(claim.won for claim in claims) == 1
        winner = next(claim for claim in claims if claim.won)
        stored = answered(await store.get_interaction(ix))
        assert stored.status == answered(winner.record).status
        assert stored.answer == (n if stored.status == "answered" else None)


async def test_a_re_add_racing_an_answer_never_resets_it(store: Store) -> None:
    await store.add_interactions([make_interaction(f"ix-{n}") for n in range(20)])
    now = time.time()
    for n in range(20):
        ix = f"ix-{n}"
        claim, _ = await asyncio.gather(
            answer_only(store, ix, answer=None, answered_by="U1", now=now),
            store.add_interactions([make_interaction(ix, run_id="child")]),
        )
        stored = answered(await store.get_interaction(ix))
        # Either order is valid; an answer that won is never undone by the re-add after it.
        assert claim.won
        assert (stored.status, stored.answered_by, stored.answer) == ("answered", "U1", None)
