"""Text the bot did not write cannot ping anyone: `<!channel>`, `<!here>`, `<@U...>` and links
from the model, an answer or a deny reason reach Slack escaped, in the card and in the thread.
Each test ends by checking that nothing Slack shows gives internals away."""

from __future__ import annotations

import json

import pytest

from blocks import ACTION_DENY_REASON
from bot import Agent
from bot.testing import FunctionModel

from . import agents
from .conftest import ALICE, BOB, BotFactory

pytestmark = pytest.mark.usefixtures("nothing_leaks")


async def test_model_echoing_channel_pings_cannot_ping(make_bot: BotFactory) -> None:
    echo = Agent(
        name="echo",
        model=FunctionModel(lambda m: "<!channel> <!here> <@U0BOB> <https://evil|click> & done"),
        tools=[],
    )
    async with make_bot(echo) as h:
        asked = await h.mention(ALICE, "say it")
        [reply] = h.texts(asked.ts)
        assert "<!channel>" not in reply and "<!here>" not in reply
        assert "<https://evil" not in reply and "<@U0BOB>" not in reply
        assert "&lt;!channel&gt;" in reply


async def test_answers_cannot_ping_through_the_card_or_the_reply(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent) as h:
        asked = await h.mention(ALICE, "release")
        card = h.card(asked.ts)
        await h.reply(BOB, asked.ts, "<!channel> <https://evil|v2> & co")
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = [updated.text, json.dumps(updated.blocks), *h.texts(asked.ts)]
        assert all("<!channel>" not in text and "<https://evil" not in text for text in shown)
        assert "&lt;!channel&gt;" in h.texts(asked.ts)[-1]


async def test_a_deny_reason_cannot_ping(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_DENY_REASON)
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        await h.slack.submit_view(BOB, view.id, {field: "<!here> <@U0ALICE> is wrong"})
        await h.bot.drain()
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None
        shown = [updated.text, json.dumps(updated.blocks), *h.texts(asked.ts)]
        assert all("<!here>" not in text and "<@U0ALICE> is" not in text for text in shown)
        assert "Denied" in h.texts(asked.ts)[-1]
