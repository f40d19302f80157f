"""Time and restarts: expiry closes cards and cancels runs, and exactly one of an expiry and a
click racing it wins (in one process or two); answered runs are recovered, and an answer the run
refuses ends it once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from blocks import ACTION_APPROVE
from bot import Agent
from bot.slack import SlackBot, load_settings
from state import AuditEntry, open_store

from .._local_slack import Message
from ..conftest import answer_only
from . import agents
from .conftest import ALICE, BOB, DAVE, BotFactory, Harness


async def test_sweeper_expires_card_and_cancels_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="1h") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        interaction_id = h.interaction_id(card)
        stale_click = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)

        h.clock.advance(3599)
        assert await h.bot.sweeper.run_until_idle() == 0
        h.clock.advance(2)
        assert await h.bot.sweeper.run_until_idle() == 1
        await h.bot.drain()

        stored = await h.store.get_interaction(interaction_id)
        assert stored is not None and stored.status == "expired"
        assert "expired" in str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]
        run = await h.store.load_run(stored.run_id)
        assert run is not None and run.resumed_by is not None
        child = await h.store.load_run(run.resumed_by)
        assert child is not None and child.status == "cancelled"
        assert h.texts(asked.ts)[-1].startswith("Stopped")
        assert "expired" in h.texts(asked.ts)[-1]
        assert [e.action for e in await h.store.recent_audit()] == ["expired"]

        await h.slack.send_interactivity(stale_click)
        await h.bot.drain()
        assert "expired" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []


async def test_click_after_expiry_before_the_sweep(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="60") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        h.clock.advance(61)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert "expired" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "expired"
        assert h.texts(asked.ts)[-1].startswith("Stopped")


async def test_restart_recovers_a_run_answered_but_never_resumed(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        interaction_id = h.interaction_id(card)
        # What a crash right after the claim leaves behind: answered, audited, never resumed.
        claim = await answer_only(
            h.store, interaction_id, answer=True, answered_by=BOB, now=time.time()
        )
        assert claim.won and claim.record is not None
        await h.store.audit(
            AuditEntry(
                at=time.time(),
                action="answered",
                interaction_id=interaction_id,
                run_id=claim.record.run_id,
                user=BOB,
            )
        )
    assert agents.DEPLOYS == []

    async with make_bot(agents.approval_agent) as restarted:
        await restarted.bot.drain()
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert restarted.texts(asked.ts) == ["Tool said: deployed api to prod"]

    async with make_bot(agents.approval_agent) as again:
        await again.bot.drain()
        assert len(agents.DEPLOYS) == 1  # recovery never resumes twice


async def test_expiry_closes_the_runs_other_cards_too(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_question_agent, HANDBACK_INTERACTION_TTL="10") as h:
        asked = await h.mention(ALICE, "two things")
        first, second = h.cards(asked.ts)
        h.clock.advance(11)
        assert await h.bot.sweeper.run_until_idle() == 1
        await h.bot.drain()
        statuses = sorted(
            record.status  # type: ignore[union-attr]
            for record in [
                await h.store.get_interaction(h.interaction_id(first)),
                await h.store.get_interaction(h.interaction_id(second)),
            ]
        )
        assert statuses == ["cancelled", "expired"]
        for card in (first, second):
            shown = str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]
            assert "hb:confirm" not in shown
        [stopped] = h.texts(asked.ts)
        assert stopped.startswith("Stopped")


async def _answer_behind_the_bots_back(h: Harness, card: Message) -> str:
    """What a crash right after the claim leaves behind: answered, never resumed."""
    claim = await answer_only(
        h.store, h.interaction_id(card), answer=True, answered_by=BOB, now=time.time()
    )
    assert claim.won and claim.record is not None
    return claim.record.run_id


async def test_recovery_finds_runs_answered_before_any_amount_of_audit(
    make_bot: BotFactory,
) -> None:
    """The store lists settled runs itself: 1,001 newer audit entries do not hide one."""
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        run_id = await _answer_behind_the_bots_back(h, h.card(asked.ts))
        await h.store.audit(AuditEntry(at=time.time(), action="answered", run_id=run_id, user=BOB))
        for n in range(1001):
            await h.store.audit(
                AuditEntry(at=time.time(), action="refused", user=DAVE, detail=f"#{n}")
            )
        recent = await h.store.recent_audit(limit=1000)
        assert not any(entry.run_id == run_id for entry in recent)
    assert agents.DEPLOYS == []

    async with make_bot(agents.approval_agent) as restarted:
        await restarted.bot.drain()
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert restarted.texts(asked.ts) == ["Tool said: deployed api to prod"]


async def test_recovery_needs_no_audit_entry_at_all(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        await _answer_behind_the_bots_back(h, h.card(asked.ts))
        # An answer is always audited with it (one atomic step); that entry names no run, so
        # recovery cannot be finding the run through the audit.
        assert [(e.action, e.run_id) for e in await h.store.recent_audit()] == [("answered", None)]
        assert h.texts(asked.ts) == []

    async with make_bot(agents.confirm_agent) as restarted:
        await restarted.bot.drain()
        assert restarted.texts(asked.ts) == ["Tool said: true"]


async def test_recovery_finishes_an_expiry_cut_short_by_a_crash(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        # The sweep closed the card, then the process died before it cancelled the run.
        closed = await h.store.close_interaction(
            h.interaction_id(card), status="expired", now=time.time()
        )
        assert closed.won

    async with make_bot(agents.approval_agent) as restarted:
        await restarted.bot.drain()
        [stopped] = restarted.texts(asked.ts)
        assert stopped.startswith("Stopped") and "expired" in stopped
        shown = restarted.slack.message(card.channel, card.ts)
        assert shown is not None and ACTION_APPROVE not in str(shown.blocks)
        assert "expired" in str(shown.blocks)
        assert agents.DEPLOYS == []


async def test_recovery_pages_through_every_settled_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        threads = [await h.mention(ALICE, f"restart {n}") for n in range(5)]
        for asked in threads:
            await _answer_behind_the_bots_back(h, h.card(asked.ts))
        assert await h.bot.answers.recover(page=2) == 5
        await h.bot.drain()
        assert [h.texts(asked.ts) for asked in threads] == [["Tool said: true"]] * 5
        assert await h.store.settled_runs() == []
        assert await h.bot.answers.recover(page=2) == 0


async def test_recovery_leaves_another_agents_runs_alone(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        run_id = await _answer_behind_the_bots_back(h, h.card(asked.ts))

    async with make_bot(agents.confirm_agent) as other:
        await other.bot.drain()
        assert other.texts(asked.ts) == []
        assert await other.store.settled_runs() == [run_id]
    assert agents.DEPLOYS == []


async def test_one_unreadable_run_does_not_stop_the_others_recovering(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(agents.confirm_agent) as h:
        threads = [await h.mention(ALICE, f"restart {n}") for n in range(3)]
        run_ids = [await _answer_behind_the_bots_back(h, h.card(t.ts)) for t in threads]
        broken = sorted(run_ids)[0]  # the first the sweep meets
        await _corrupt_run(store_url, broken)
        assert await h.bot.answers.recover() == 2
        await h.bot.drain()
        answered = [t for t, r in zip(threads, run_ids, strict=True) if r != broken]
        assert [h.texts(t.ts) for t in answered] == [["Tool said: true"]] * 2


async def _corrupt_run(store_url: str, run_id: str) -> None:
    """Overwrite a run's stored JSON with something that does not decode."""
    if store_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        with conn:
            conn.execute("UPDATE runs SET rec = '{' WHERE run_id = ?", (run_id,))
        conn.close()
        return
    import redis.asyncio as aioredis

    base, prefix = store_url.split("?prefix=", 1)
    client = aioredis.Redis.from_url(base)
    try:
        await client.hset(f"{prefix}run:{run_id}", "rec", "{")
    finally:
        await client.aclose()


@pytest.mark.usefixtures("nothing_leaks")
async def test_an_answer_the_run_refuses_ends_the_run_once(make_bot: BotFactory) -> None:
    """A stored answer the runtime will not take (here: written behind the bot's back, as a
    schema change between pause and resume would leave it) ends the run instead of leaving it
    paused and complained about on every restart."""
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        claim = await answer_only(
            h.store, h.interaction_id(card), answer="perhaps", answered_by=BOB, now=h.clock()
        )
        assert claim.won and claim.record is not None
        run_id = claim.record.run_id
    for _ in range(2):  # two restarts: the second finds nothing left to do
        async with make_bot(agents.confirm_agent) as restarted:
            await restarted.bot.drain()
    [reply] = h.texts(asked.ts)
    assert reply.startswith("Stopped")
    run = await _load_run(h, run_id)
    assert run is not None and run.resumed_by is not None


async def _load_run(h: Harness, run_id: str) -> Any:
    async with open_store(h.bot.settings.handback_store) as store:
        return await store.load_run(run_id)


@pytest.mark.usefixtures("nothing_leaks")
async def test_expiry_racing_a_click_exactly_one_wins(make_bot: BotFactory) -> None:
    for _ in range(5):
        async with make_bot(agents.approval_agent) as h:
            asked = await h.mention(ALICE, "deploy")
            card = h.card(asked.ts)
            record = await h.store.get_interaction(h.interaction_id(card))
            assert record is not None
            await asyncio.gather(
                h.slack.click(BOB, card.ts, ACTION_APPROVE), h.bot.sweeper.expire(record)
            )
            await h.bot.drain()
            stored = await h.store.get_interaction(record.interaction_id)
            assert stored is not None and stored.status in {"answered", "expired"}
            [final] = h.texts(asked.ts)
            if stored.status == "answered":
                assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
                assert final == "Tool said: deployed api to prod"
            else:
                assert agents.DEPLOYS == [] and final.startswith("Stopped")
                assert "expired" in h.ephemerals(BOB)[-1]
            audit = await h.store.recent_audit(limit=1000)
            actions = [e.action for e in audit if e.interaction_id == record.interaction_id]
            assert sorted(a for a in actions if a in {"answered", "expired"}) in (
                ["answered"],
                ["expired"],
            )
            agents.DEPLOYS.clear()
        h.slack.messages.clear()
        h.slack.ephemerals.clear()


@asynccontextmanager
async def _second_bot(h: Harness, store_url: str, agent: Agent) -> AsyncIterator[SlackBot]:
    config = load_settings(
        slack_bot_token=h.slack.bot_token,
        slack_signing_secret=h.slack.signing_secret,
        slack_api_url=h.slack.api_url,
        handback_store=store_url,
    )
    async with (
        open_store(store_url) as store,
        SlackBot(
            agent=agents.twin(agent), store=store, settings=config, clock=h.clock, loops=False
        ) as bot,
    ):
        yield bot


@pytest.mark.usefixtures("nothing_leaks")
async def test_sweeper_in_one_process_and_click_in_another(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="60") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        async with _second_bot(h, store_url, agents.approval_agent) as other:
            h.clock.advance(61)
            await asyncio.gather(
                h.slack.click(BOB, card.ts, ACTION_APPROVE), other.sweeper.run_until_idle()
            )
            await asyncio.gather(h.bot.drain(), other.drain())
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "expired"
        assert agents.DEPLOYS == []
        [final] = h.texts(asked.ts)
        assert final.startswith("Stopped")
        assert sum(e.action == "expired" for e in await h.store.recent_audit()) == 1


@pytest.mark.usefixtures("nothing_leaks")
async def test_interaction_ttl_of_one_second(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_INTERACTION_TTL="1") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)  # in time
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        second = await h.mention(ALICE, "deploy")
        late = h.card(second.ts)
        h.clock.advance(1.0)  # exactly at the deadline: expired
        await h.click(BOB, late.ts, ACTION_APPROVE)
        assert "expired" in h.ephemerals(BOB)[-1]
        assert len(agents.DEPLOYS) == 1
        assert h.texts(second.ts)[-1].startswith("Stopped")
