"""The two-person rule (`Approval(count=2)`) over real HTTP on both stores: two distinct
approvers, never whoever asked; the card counts them and stays open; one denial ends it."""

from __future__ import annotations

import asyncio
import re

from blocks import ACTION_APPROVE, ACTION_DENY

from .._local_slack import Message
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness

APPROVERS = f"{BOB},{CAROL},{DAVE}"


def _shown(h: Harness, card: Message) -> str:
    message = h.slack.message(card.channel, card.ts)
    assert message is not None
    return str(message.blocks)


async def _votes_audited(h: Harness) -> list[str]:
    return [e.detail for e in await h.store.recent_audit() if e.action == "answered"]


async def test_two_approvers_are_needed_and_the_card_counts_them(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS=APPROVERS) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        assert "Needs 2 different approvers" in str(card.blocks)

        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        shown = _shown(h, card)
        assert f"1 of 2 approved:* <@{BOB}>" in shown
        assert ACTION_APPROVE in shown  # still open for the second approver
        assert agents.DEPLOYS == []
        assert await _votes_audited(h) == ["approved 1 of 2"]

        await h.click(CAROL, card.ts, ACTION_APPROVE)
        shown = _shown(h, card)
        assert ACTION_APPROVE not in shown
        assert f"Approved* by <@{BOB}> and <@{CAROL}>" in shown
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"
        assert await _votes_audited(h) == ["approved 2 of 2", "approved 1 of 2"]
        # The run resumed with who approved.
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None
        assert stored.answer == {"approved": True, "approvers": [BOB, CAROL]}


async def test_the_same_person_twice_counts_once(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS=APPROVERS) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        await h.click(BOB, card.ts, ACTION_APPROVE)

        assert h.ephemerals(BOB) == ["You already approved this; it needs one more approver."]
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert [v.user for v in stored.votes] == [BOB]
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [(e.user, e.detail) for e in refused] == [
            (BOB, "You already approved this; it needs one more approver.")
        ]
        assert f"1 of 2 approved:* <@{BOB}>" in _shown(h, card)

        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_a_denial_after_one_approval_ends_it(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS=APPROVERS) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        # Dave's click leaves his (stale) card after the card closed.
        late = h.slack.block_actions_payload(DAVE, card.ts, ACTION_APPROVE)
        await h.click(CAROL, card.ts, ACTION_DENY)

        assert agents.DEPLOYS == []
        assert "Denied" in h.texts(asked.ts)[-1]
        shown = _shown(h, card)
        assert ACTION_APPROVE not in shown
        assert f"Denied* by <@{CAROL}>" in shown and f"before that by <@{BOB}>" in shown
        # Closed: a later approval is refused and changes nothing.
        assert (await h.slack.send_interactivity(late)).status == 200
        await h.bot.drain()
        assert "already answered" in h.ephemerals(DAVE)[-1]
        assert agents.DEPLOYS == []


async def test_the_requester_may_not_be_one_of_the_two(make_bot: BotFactory) -> None:
    """Even with self-approval allowed and alice on the list."""
    async with make_bot(
        agents.two_person_agent,
        HANDBACK_APPROVERS=f"{APPROVERS},{ALICE}",
        HANDBACK_ALLOW_SELF_APPROVAL="true",
    ) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert "someone else has to approve it" in h.ephemerals(ALICE)[-1]
        assert agents.DEPLOYS == []
        assert f"1 of 2 approved:* <@{BOB}>" in _shown(h, card)


async def test_thirty_concurrent_clicks_count_two_approvals_and_deploy_once(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS=APPROVERS) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        people = (BOB, CAROL, DAVE, ALICE)

        responses = await asyncio.gather(
            *(h.slack.click(people[n % 4], card.ts, ACTION_APPROVE) for n in range(30))
        )
        assert [r.status for r in responses] == [200] * 30
        await h.bot.drain()

        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert sorted(await _votes_audited(h)) == ["approved 1 of 2", "approved 2 of 2"]
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "answered"
        approvers = stored.answer["approvers"]
        assert len(set(approvers)) == 2 and set(approvers) <= {BOB, CAROL, DAVE}
        # The requester: refused every time, told so and audited (as the requester while the
        # card was open, as too late once it had closed), and never counted.
        audit = await h.store.recent_audit()
        refused = [e for e in audit if e.action == "refused"]
        assert len([e for e in refused if e.user == ALICE]) == 7
        told = h.ephemerals(ALICE)
        assert len(told) == 7
        assert all("someone else" in text or "already answered" in text for text in told), told
        assert ALICE not in [v.user for v in stored.votes]
        # Every other click was refused with a reason too, and audited: 30 in all.
        assert len(refused) == 28
        shown = _shown(h, card)
        assert ACTION_APPROVE not in shown
        named = re.findall(r"<@(U0[A-Z]+)>", shown.split("Approved* by", 1)[1])
        assert named[:2] == approvers
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"


async def test_a_late_progress_update_does_not_reopen_the_closed_card(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS=APPROVERS) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        # Bob's "1 of 2" update fails once, so it lands (on the retry) after Carol's approval
        # closed the card.
        h.slack.fail_next("chat.update", status=500)
        await h.slack.click(BOB, card.ts, ACTION_APPROVE)
        await h.slack.wait_for(lambda: [c for c in h.slack.calls if c.method == "chat.update"])
        await h.slack.click(CAROL, card.ts, ACTION_APPROVE)
        await h.bot.drain()

        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        shown = _shown(h, card)
        assert ACTION_APPROVE not in shown
        assert f"Approved* by <@{BOB}> and <@{CAROL}>" in shown
