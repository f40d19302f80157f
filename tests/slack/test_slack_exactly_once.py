"""Exactly once and nothing forged: concurrent clicks, several actions in one payload, tampered
values, payloads without a user, forged channels and references."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY, ACTION_SELECT

from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness, calls_to


async def _unchanged(h: Harness, card_ts: str, interaction_id: str) -> None:
    stored = await h.store.get_interaction(interaction_id)
    assert stored is not None and stored.status == "pending" and stored.answer is None
    assert [c for c in calls_to(h.slack, "chat.update") if c.args.get("ts") == card_ts] == []
    assert not any(e.action == "answered" for e in await h.store.recent_audit())


async def test_thirty_concurrent_clicks_resume_once(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        clickers = [BOB, CAROL, DAVE] * 10

        statuses = await asyncio.gather(
            *(h.slack.click(user, card.ts, ACTION_APPROVE) for user in clickers)
        )
        await h.bot.drain()

        assert [s.status for s in statuses] == [200] * 30
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        updates = [c for c in calls_to(h.slack, "chat.update") if c.args.get("ts") == card.ts]
        assert len(updates) == 1
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.answered_by in {BOB, CAROL, DAVE}
        told = [e for e in h.slack.ephemerals if "already answered" in e.text]
        assert len(told) == 29
        assert all(f"<@{stored.answered_by}>" in e.text for e in told)
        audit = await h.store.recent_audit(limit=100)
        assert sum(e.action == "answered" for e in audit) == 1
        assert sum(e.action == "refused" for e in audit) == 29


async def test_a_click_after_the_answer_is_told_who_answered(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, "hb:confirm")
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        # The same click again, as a stale client or a Slack retry would send it.
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert h.texts(asked.ts) == ["Tool said: true"]
        assert h.ephemerals(BOB) == [f"This was already answered by <@{BOB}>."]


async def test_tampered_option_index_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.select_agent) as h:
        asked = await h.mention(ALICE, "pick")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:option:1", value="7")
        assert "not one of" in h.ephemerals(BOB)[-1]
        await _unchanged(h, card.ts, h.interaction_id(card))
        assert h.texts(asked.ts) == []


async def test_tampered_select_value_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.big_select_agent) as h:
        asked = await h.mention(ALICE, "pick")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_SELECT, selected="service-001")
        payload["actions"][0]["selected_option"] = {
            "text": {"type": "plain_text", "text": "rm -rf /"},
            "value": "rm -rf /",
        }
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status == 200
        assert h.ephemerals(BOB)
        await _unchanged(h, card.ts, h.interaction_id(card))


def _forge_reference(payload: dict[str, Any], interaction_id: str) -> None:
    action = payload["actions"][0]
    part = action["block_id"].rsplit("|", 1)[1]
    action["block_id"] = f"hb|{interaction_id}|{part}"


async def test_forged_interaction_reference_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        _forge_reference(payload, "forged-interaction")
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert "no such request" in h.ephemerals(BOB)[-1]
        await _unchanged(h, card.ts, h.interaction_id(card))
        assert agents.DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.interaction_id for e in refused] == ["forged-interaction"]


async def test_reference_to_another_channels_request_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        elsewhere = await h.mention(ALICE, "deploy", channel="C0DEPLOYS")
        target = h.interaction_id(h.card(elsewhere.ts))
        here = await h.mention(ALICE, "deploy")
        card = h.card(here.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        _forge_reference(payload, target)
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert "does not belong" in h.ephemerals(BOB)[-1]
        await _unchanged(h, card.ts, target)
        assert agents.DEPLOYS == []


async def test_a_button_that_is_not_ours_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        payload["actions"][0]["block_id"] = "not-ours"
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        # Bolt acks only actions it has a listener for; ours matches `hb:` action ids.
        assert response.status == 200
        assert h.ephemerals(BOB)
        await _unchanged(h, card.ts, h.interaction_id(card))


async def test_modal_for_someone_else_cannot_answer_a_closed_request(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.typed_agent) as h:
        asked = await h.mention(ALICE, "scale")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:answer")
        await h.click(CAROL, card.ts, "hb:answer")
        bob_view, carol_view = list(h.slack.views.values())
        [field] = [b["block_id"] for b in bob_view.view["blocks"] if b["type"] == "input"]
        assert (await h.slack.submit_view(BOB, bob_view.id, {field: "2"})).status == 200
        await h.bot.drain()
        late = await h.slack.submit_view(CAROL, carol_view.id, {field: "4"})
        await h.bot.drain()
        body = late.json()
        assert body["response_action"] == "errors"
        assert "already answered" in json.dumps(body["errors"])
        assert h.texts(asked.ts) == ["Tool said: replicas=2"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_click_without_a_user_changes_nothing(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        del payload["user"]
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status in {200, 400}
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        assert h.texts(asked.ts) == []


@pytest.mark.usefixtures("nothing_leaks")
async def test_several_actions_in_one_payload_resume_once(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        deny = h.slack.block_actions_payload(BOB, card.ts, ACTION_DENY)["actions"][0]
        payload["actions"].append(deny)
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]
        updates = [c for c in calls_to(h.slack, "chat.update") if c.args.get("ts") == card.ts]
        assert len(updates) == 1


@pytest.mark.usefixtures("nothing_leaks")
async def test_a_click_in_another_channel_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        payload["channel"] = {"id": "C0DEPLOYS", "name": "deploys"}
        payload["container"]["channel_id"] = "C0DEPLOYS"
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert "does not belong" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []


@pytest.mark.usefixtures("nothing_leaks")
async def test_modal_naming_an_unknown_interaction(make_bot: BotFactory) -> None:
    async with make_bot(agents.typed_agent) as h:
        asked = await h.mention(ALICE, "scale")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:answer")
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        payload = h.slack.view_submission_payload(BOB, view.id, {field: "3"})
        payload["view"]["private_metadata"] = "forged-interaction"
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status == 200
        assert "no such request" in json.dumps(response.json())
        assert h.texts(asked.ts) == []
