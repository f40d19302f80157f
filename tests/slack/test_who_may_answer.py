"""Who may answer what, over real HTTP: answerers and approvers from the settings (people or
user groups read from Slack), never the requester's own approval unless allowed and listed; a
refusal changes nothing, tells the person, and is audited; a group lookup that fails refuses.
Each test ends by checking that nothing Slack shows gives internals away."""

from __future__ import annotations

import json

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY, ACTION_DENY_REASON

from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, model_calls

pytestmark = pytest.mark.usefixtures("nothing_leaks")

EVE = "U0EVE"


async def test_thread_reply_by_a_non_answerer_does_not_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "release")
        card = h.card(asked.ts)
        calls = model_calls(agents.free_text_agent)
        await h.reply(CAROL, asked.ts, "carol-release")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert "may answer" in h.ephemerals(CAROL)[-1]
        assert model_calls(agents.free_text_agent) == calls  # no new run either
        await h.reply(BOB, asked.ts, "bob-release")
        assert h.texts(asked.ts) == ["Tool said: bob-release"]


async def test_requester_may_deny_but_not_approve_their_own_request(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "someone else" in h.ephemerals(ALICE)[-1]
        await h.click(ALICE, card.ts, ACTION_DENY)
        assert agents.DEPLOYS == []
        assert "Denied" in h.texts(asked.ts)[-1]
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.answered_by == ALICE


async def test_non_approver_may_not_deny(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(DAVE, card.ts, ACTION_DENY)
        await h.click(DAVE, card.ts, ACTION_DENY_REASON)
        assert all("may approve" in text for text in h.ephemerals(DAVE))
        assert len(h.ephemerals(DAVE)) == 2
        assert h.slack.views == {}
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"


async def test_a_non_approver_cannot_close_an_approval_by_talking(make_bot: BotFactory) -> None:
    async with make_bot(agents.recall_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "deploy api")
        card = h.card(asked.ts)
        calls = model_calls(agents.recall_agent)
        await h.reply(DAVE, asked.ts, "forget it")  # would supersede the approval
        assert "may approve" in h.ephemerals(DAVE)[-1]
        assert model_calls(agents.recall_agent) == calls
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [DAVE]
        # An approver, or the requester, may move the conversation on.
        await h.reply(BOB, asked.ts, "what did alice ask?")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "superseded"
        assert h.texts(asked.ts)[-1].endswith("| what did alice ask?")


async def test_the_requester_may_withdraw_a_question_they_may_not_answer(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.confirm_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        await h.reply(ALICE, asked.ts, "never mind")
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "superseded"
        assert h.ephemerals(ALICE) == []


async def test_self_approval_allowed_by_setting(make_bot: BotFactory) -> None:
    async with make_bot(
        agents.approval_agent, HANDBACK_APPROVERS="U0ALICE", HANDBACK_ALLOW_SELF_APPROVAL="1"
    ) as h:
        asked = await h.mention(ALICE, "deploy")
        await h.click(ALICE, h.card(asked.ts).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_self_approval_flag_never_bypasses_the_approver_list(make_bot: BotFactory) -> None:
    # The flag relaxes "not the requester" only: Alice asked, is not on the list, and the flag is
    # on; her approve is refused and audited, nothing runs, and a listed approver still can.
    async with make_bot(
        agents.approval_agent, HANDBACK_APPROVERS="U0BOB", HANDBACK_ALLOW_SELF_APPROVAL="true"
    ) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "may approve `deploy`" in h.ephemerals(ALICE)[-1]
        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [ALICE]
        h.slack.add_user("U0BOB", "bob")
        await h.click("U0BOB", card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_empty_approver_list_means_anyone_but_the_requester(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, ACTION_APPROVE)
        assert "someone else" in h.ephemerals(ALICE)[-1]
        h.slack.add_user(EVE, "eve")
        await h.click(EVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


@pytest.mark.parametrize("failure", ["server_error", "unknown_group"])
async def test_user_group_lookup_failure_fails_closed(make_bot: BotFactory, failure: str) -> None:
    group = "S0OPS" if failure == "server_error" else "S0GONE"
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=group) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        if failure == "server_error":
            for _ in range(3):  # more than the client's retries
                h.slack.fail_next("usergroups.users.list", status=500)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        [told] = h.ephemerals(BOB)
        assert group in told and "could not" in told.lower()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [BOB]
        if failure == "server_error":
            await h.click(BOB, card.ts, ACTION_APPROVE)  # Slack is back: the click works
            assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_modal_submitted_by_someone_who_may_not_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.typed_agent, HANDBACK_ANSWERERS="U0BOB") as h:
        asked = await h.mention(ALICE, "scale")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:answer")
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        payload = h.slack.view_submission_payload(BOB, view.id, {field: "3"})
        payload["user"] = {"id": CAROL, "username": "carol", "name": "carol", "team_id": "T0LOCAL"}
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.json()["response_action"] == "errors"
        assert "may answer" in json.dumps(response.json()["errors"])
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
