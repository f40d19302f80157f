"""A request approved under a standing grant whose giver leaves the approvers before the run
resumes, over real HTTP on both stores: the resume's re-check withdraws the approval, the request
gets a normal card (`Recheck.show_reopened`), the tool does not run, and nothing in the thread
says it did; a current approver's click then runs it once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from blocks import ACTION_APPROVE

from .._local_slack import ApiCall, TestSlack
from . import agents
from .conftest import ALICE, BOB, CAROL, BotFactory
from .test_grant_bounds import THREAD_GRANT, group_grant_agent
from .test_stop_authorized import InterposingSlack

GRANT_TAKEN_BACK = "It did not run under the standing grant: it waits for an approval here."
"""What the reopened card says, word for word."""


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with InterposingSlack() as local:
        yield local


async def test_a_grant_approval_withdrawn_by_the_recheck_gets_a_card_and_says_nothing_false(
    make_bot: BotFactory, slack: InterposingSlack
) -> None:
    async with make_bot(group_grant_agent) as h:
        slack.usergroups["S0OPS"] = [BOB, CAROL]
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        assert len(agents.DEPLOYS) == 1
        first_card = h.card(asked.ts).ts

        left: list[str] = []

        async def bob_leaves_on_the_notice(call: ApiCall) -> None:
            # The grant was used (Bob could approve then); he leaves the group before the
            # recovery resumes the run, whose re-check reads the group fresh.
            text = str(call.args.get("text") or "")
            if call.method == "chat.postMessage" and "grant" in text and not left:
                slack.usergroups["S0OPS"] = [CAROL]
                h.clock.pass_fresh_reads()  # past what "fresh" may reuse
                left.append(text)

        slack.before = bob_leaves_on_the_notice
        await h.reply(ALICE, asked.ts, "deploy again")
        slack.before = None
        assert left, "the grant was not used"
        for _ in range(3):
            h.clock.advance(5)
            await h.bot.sweeper.run_until_idle()
            await h.bot.drain()

        assert len(agents.DEPLOYS) == 1
        card = h.card(asked.ts)
        assert card.ts != first_card  # a card of its own, posted when the approval was withdrawn
        buttons = [
            element["action_id"]
            for block in card.blocks
            if block["type"] == "actions"
            for element in block["elements"]
        ]
        assert ACTION_APPROVE in buttons
        assert "withdrawn" in str(card.blocks)
        # The notice said it runs without a card; the card takes that back.
        assert any("runs without a card" in t for t in h.texts(asked.ts))
        assert GRANT_TAKEN_BACK in str(card.blocks)
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.status == "pending"
        assert record.message_ts == card.ts
        withdrawn = [e for e in await h.store.recent_audit() if e.action == "withdrawn"]
        assert [e.user for e in withdrawn] == [BOB]
        # Nothing says the second call ran: one result in the thread, the first call's.
        said = [t for t in h.texts(asked.ts) if "deployed" in t.lower()]
        assert len(said) <= 1, said
        before = len(said)

        assert await h.click(CAROL, card.ts, ACTION_APPROVE) == 200
        assert len(agents.DEPLOYS) == 2
        assert ACTION_APPROVE not in str(h.card(asked.ts).blocks)  # closed, approved once
        assert len([t for t in h.texts(asked.ts) if "deployed" in t.lower()]) >= before
