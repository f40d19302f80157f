"""What a question and a deploy under a standing grant cost in bot messages, over signed HTTP,
classic and as an agent session: one card per pending request, changed in place when answered,
and nothing left saying "waiting" (a pending task, an hourglass) once it was answered."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blocks import ACTION_CONFIRM

from .._local_slack import Message, TestSlack
from . import agents
from .conftest import ALICE, BOB, BotFactory, Harness

THREAD_GRANT = "hb:grant:thread"


@pytest.fixture(params=[False, True], ids=["classic", "agent-session"])
async def slack(request: pytest.FixtureRequest) -> AsyncIterator[TestSlack]:
    async with TestSlack(agent_view=request.param) as local:
        yield local


def nothing_still_waiting(h: Harness, thread_ts: str) -> None:
    for message in h.bot_replies(thread_ts):
        pending = [t for t in message.tasks().values() if t.get("status") != "complete"]
        assert pending == [], message
        assert not message.reactions, message
        assert not message.streaming, message


def kinds(messages: list[Message]) -> list[str]:
    return ["card" if m.blocks else "reply" for m in messages]


async def test_a_question_costs_its_card_and_the_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart api")
        assert kinds(h.bot_replies(asked.ts)) == ["card"]
        card = h.card(asked.ts)
        assert "Waiting" not in str(card.blocks)

        await h.click(BOB, card.ts, ACTION_CONFIRM)
        after = h.bot_replies(asked.ts)
        assert kinds(after) == ["card", "reply"]
        assert after[0].ts == card.ts and after[0].edited  # the same card, changed in place
        assert after[1].text == "Tool said: true"
        nothing_still_waiting(h, asked.ts)


async def test_a_deploy_then_one_under_the_grant_cost_two_messages_each(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0BOB,U0CAROL") as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        assert kinds(h.bot_replies(asked.ts)) == ["card"]
        assert await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT) == 200
        assert kinds(h.bot_replies(asked.ts)) == ["card", "reply"]

        await h.reply(ALICE, asked.ts, "deploy again")
        replies = h.bot_replies(asked.ts)
        # No card, no "waiting for approval": the notice of the grant, then the result.
        assert kinds(replies) == ["card", "reply", "reply", "reply"]
        notice, result = replies[2].text, replies[3].text
        assert notice.startswith(":unlock: `deploy` runs without a card")
        assert result == "Tool said: deployed api to dev"
        assert not any("Waiting" in str(m.chunks) for m in replies)
        assert len(agents.DEPLOYS) == 2
        nothing_still_waiting(h, asked.ts)
