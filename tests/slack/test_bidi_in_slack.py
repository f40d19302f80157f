"""Bidi controls typed by people reach Slack shown as `\\uXXXX`, never raw."""

from __future__ import annotations

import json

from blocks import ACTION_DENY_REASON

from . import agents
from .conftest import ALICE, BOB, BotFactory

RLO = "\u202e"


async def test_an_answer_typed_in_the_thread_is_shown_escaped_on_the_card(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.free_text_agent) as h:
        asked = await h.mention(ALICE, "release")
        card = h.card(asked.ts)
        await h.reply(BOB, asked.ts, f"v2 {RLO}lanif")
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = updated.text + json.dumps(updated.blocks, ensure_ascii=False)
        assert RLO not in shown
        assert "\\u202elanif" in shown


async def test_a_deny_reason_is_shown_escaped_on_the_card(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_DENY_REASON)
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        await h.slack.submit_view(BOB, view.id, {field: f"risky {RLO}dorp"})
        await h.bot.drain()
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = updated.text + json.dumps(updated.blocks, ensure_ascii=False)
        assert RLO not in shown
        assert "\\u202edorp" in shown


async def test_the_final_answer_shows_hidden_characters(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        asked = await h.mention(ALICE, f"hello {RLO}dlrow")
        [reply] = h.texts(asked.ts)
        assert RLO not in reply
        assert "\\u202edlrow" in reply
