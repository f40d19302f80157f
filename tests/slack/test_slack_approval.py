"""Approvals end to end over real HTTP: mention, card, click, card updated, answer in thread."""

from __future__ import annotations

import json

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY, ACTION_DENY_REASON

from .._local_slack import Message
from ..blocks._slack import check_message
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness


async def test_approve_by_allowed_user_resumes_and_answers_in_thread(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        assert card.thread_ts == asked.ts
        assert "deploy" in card.text
        assert agents.DEPLOYS == []

        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200

        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None and updated.edited
        shown = str(updated.blocks)
        assert f"<@{BOB}>" in shown and "Approved" in shown
        assert ACTION_APPROVE not in shown  # the buttons are gone
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"
        audit = await h.store.recent_audit()
        assert [e.action for e in audit if e.action == "answered"] == ["answered"]


async def test_deny_reason_reaches_the_model(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)

        await h.click(BOB, card.ts, ACTION_DENY_REASON)
        [view] = list(h.slack.views.values())
        assert view.user == BOB
        [reason_block] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]

        empty = await h.slack.submit_view(BOB, view.id, {reason_block: ""})
        assert empty.json()["response_action"] == "errors"
        assert reason_block in empty.json()["errors"]
        await h.bot.drain()
        assert agents.DEPLOYS == []

        done = await h.slack.submit_view(BOB, view.id, {reason_block: "change freeze"})
        assert done.status == 200 and not done.body.strip()
        await h.bot.drain()

        assert agents.DEPLOYS == []
        assert "change freeze" in h.texts(asked.ts)[-1]
        assert "Denied" in h.texts(asked.ts)[-1]
        updated = h.slack.message(card.channel, card.ts)
        assert updated is not None and f"<@{BOB}>" in str(updated.blocks)


async def test_plain_deny_button(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        await h.click(CAROL, h.card(asked.ts).ts, ACTION_DENY)
        assert agents.DEPLOYS == []
        assert "Denied" in h.texts(asked.ts)[-1]


async def test_policy_refusals_are_ephemeral_and_audited(make_bot: BotFactory) -> None:
    async with make_bot(
        agents.approval_agent, HANDBACK_TOOL_APPROVERS='{"deploy": ["S0OPS", "U0DAVE"]}'
    ) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)

        await h.click(ALICE, card.ts, ACTION_APPROVE)  # asked for it herself
        assert "someone else" in h.ephemerals(ALICE)[-1]
        h.slack.add_user("U0EVE", "eve")
        await h.click("U0EVE", card.ts, ACTION_APPROVE)  # not an approver
        assert "may approve `deploy`" in h.ephemerals("U0EVE")[-1]
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert {e.user for e in refused} == {ALICE, "U0EVE"}

        await h.click(DAVE, card.ts, ACTION_APPROVE)  # named directly
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_self_approval_when_allowed(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_ALLOW_SELF_APPROVAL="true") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        await h.click(ALICE, h.card(asked.ts).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def _laundered_card(h: Harness) -> tuple[Message, Message]:
    """Alice asks; Bob, an approver, answers her question with "please deploy"; the model asks
    to deploy. The thread's first message and the approval card."""
    asked = await h.mention(ALICE, "what should happen with api?")
    question = h.card(asked.ts)
    await h.reply(BOB, asked.ts, "please deploy")
    card = h.card(asked.ts)
    assert card.ts != question.ts and "deploy" in card.text
    return asked, card


@pytest.mark.parametrize("self_approval", ["false", "true"])
async def test_answering_a_question_does_not_let_you_approve_what_it_led_to(
    make_bot: BotFactory, self_approval: str
) -> None:
    async with make_bot(
        agents.laundering_agent,
        HANDBACK_APPROVERS=f"{BOB},{CAROL},{ALICE}",
        HANDBACK_ALLOW_SELF_APPROVAL=self_approval,
    ) as h:
        asked, card = await _laundered_card(h)
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.requester == ALICE
        assert set(stored.requesters) == {ALICE, BOB}

        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert agents.DEPLOYS == []
        assert "answered a question or sent a message" in h.ephemerals(BOB)[-1]
        assert "someone else has to approve it" in h.ephemerals(BOB)[-1]
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [BOB]
        assert refused[0].interaction_id == h.interaction_id(card)
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"

        await h.click(CAROL, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"


async def test_whoever_answered_may_still_deny(make_bot: BotFactory) -> None:
    async with make_bot(agents.laundering_agent, HANDBACK_APPROVERS=f"{BOB},{CAROL}") as h:
        asked, card = await _laundered_card(h)
        await h.click(BOB, card.ts, ACTION_DENY)
        assert agents.DEPLOYS == []
        assert "Denied" in h.texts(asked.ts)[-1]


async def test_a_new_turn_after_an_answer_starts_a_fresh_set_of_requesters(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.laundering_agent, HANDBACK_APPROVERS=f"{BOB},{CAROL}") as h:
        asked, card = await _laundered_card(h)
        await h.click(CAROL, card.ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 1

        # Carol's next message is a turn of its own: Bob shaped the last one, not this one.
        await h.reply(CAROL, asked.ts, "and now?", mention=True)
        await h.reply(DAVE, asked.ts, "deploy again")
        second = h.card(asked.ts)
        stored = await h.store.get_interaction(h.interaction_id(second))
        assert stored is not None and set(stored.requesters) == {CAROL, DAVE}
        await h.click(BOB, second.ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 2


async def test_an_approver_may_approve_the_next_call_of_the_same_turn(
    make_bot: BotFactory,
) -> None:
    """A plain approval steers nothing (a denial's reason or an answer to a question would), so
    approving one call does not make the approver a requester of the turn's next one."""
    async with make_bot(agents.double_deploy_agent, HANDBACK_APPROVERS="U0BOB") as h:
        asked = await h.mention(ALICE, "deploy api and web")
        assert await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE) == 200
        second = h.card(asked.ts)
        assert "web" in json.dumps(second.blocks)
        assert await h.click(BOB, second.ts, ACTION_APPROVE) == 200
        assert [d["service"] for d in agents.DEPLOYS] == ["api", "web"]
        assert h.ephemerals(BOB) == []


async def test_the_card_says_who_may_approve(make_bot: BotFactory) -> None:
    """The footer names the approvers as the policy resolves them: the rule's own list (code),
    else the tool's or the global one (environment), else anyone but whoever asked."""
    cases = [
        (
            agents.approval_agent,
            {"HANDBACK_APPROVERS": "S0OPS,U0CAROL"},
            "<!subteam^S0OPS>, <@U0CAROL>",
        ),
        (agents.approval_agent, {"HANDBACK_TOOL_APPROVERS": '{"deploy": ["U0BOB"]}'}, "<@U0BOB>"),
        (agents.reminding_agent, {"HANDBACK_APPROVERS": "U0CAROL"}, "<!subteam^S0OPS>"),
        (agents.approval_agent, {}, "Anyone here may approve, except whoever asked"),
    ]
    for agent, env, shown in cases:
        async with make_bot(agent, **env) as h:
            asked = await h.mention(ALICE, "deploy api to prod")
            card = h.card(asked.ts)
            footer = str(card.blocks[-1])
            assert shown in footer, (env, footer)
            check_message({"text": card.text, "blocks": card.blocks})
