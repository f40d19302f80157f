"""A pause posts a card only for a request that needs one: the store's add says which requests
already have one and which were answered meanwhile (no read of each first)."""

from __future__ import annotations

import time

from bot.events import InteractionEvent

# Calls the card poster directly with its thread: a retried pause has no public entry point.
from bot.slack._turns import Thread

from ..conftest import answer_only
from . import agents
from .conftest import ALICE, BOB, BotFactory


async def test_a_turn_paused_again_keeps_its_card_and_posts_none_once_answered(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.message_ts == card.ts
        event = InteractionEvent.of(record.run_id, "", record)
        thread = Thread(channel=record.channel, thread_ts=asked.ts, requester=ALICE)
        cards = h.bot.conversations.cards

        # Paused again while it is pending (a retried turn): the card stays, nothing is posted.
        await cards.post(record.run_id, [event], thread, [ALICE])
        assert [c.ts for c in h.cards(asked.ts)] == [card.ts]
        kept = await h.store.get_interaction(record.interaction_id)
        assert kept is not None
        assert (kept.status, kept.message_ts, kept.created_at, kept.expires_at) == (
            "pending",
            card.ts,
            record.created_at,
            record.expires_at,
        )

        # Answered meanwhile: the add keeps the answer, and no card asks again.
        claim = await answer_only(
            h.store, record.interaction_id, answer=True, answered_by=BOB, now=time.time()
        )
        assert claim.won
        await cards.post(record.run_id, [event], thread, [ALICE])
        assert [c.ts for c in h.cards(asked.ts)] == [card.ts]
        assert await h.store.get_interaction(record.interaction_id) == claim.record
