"""An MCP server's question in Slack: a card in the thread that shows the server's text as
text, answered by its buttons (one list) or a modal (several fields) checked against the
server's schema with errors inline; Decline and Cancel reach the server as such; URL mode shows
the host and an Open link button, and never offers an http:// link."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from blocks import ACTION_ANSWER, ACTION_ELICIT, ACTION_OPTION
from bot import Agent
from bot.mcp import MCPServer
from bot.testing import FunctionModel

from .._local_slack import Ephemeral
from ..mcp.conftest import Ops, ops_in
from .conftest import ALICE, BOB, BotFactory, Harness, calls_to

pytestmark = pytest.mark.slow


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


def _model(call: dict[str, Any]) -> FunctionModel:
    def respond(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [call]
        return "Tool said: " + str(messages[-1]["content"])

    return FunctionModel(respond)


@asynccontextmanager
async def _bot(
    make_bot: BotFactory, server: MCPServer, call: dict[str, Any]
) -> AsyncIterator[Harness]:
    agent = Agent(name="ops", model=_model(call), tools=[server])
    async with agent.toolsets_open(), make_bot(agent) as h:
        yield h


def _ungated(ops: Ops) -> MCPServer:
    return ops.stdio(approvals={"scale": False, "pick": False, "login": False})


SCALE = {"name": "ops_scale", "arguments": {"service": "api"}}
PICK = {"name": "ops_pick", "arguments": {}}


def _actions(blocks: list[dict[str, Any]]) -> list[str]:
    return [
        element["action_id"]
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]


async def test_one_list_is_buttons_and_the_pick_reaches_the_server_as_accept(
    make_bot: BotFactory, ops: Ops
) -> None:
    async with _bot(make_bot, _ungated(ops), PICK) as h:
        asked = await h.mention(ALICE, "pick a region")
        card = h.card(asked.ts)
        shown = json.dumps(card.blocks)
        assert "&lt;!channel&gt;" in shown and "<!channel>" not in shown  # the server's text
        assert "*MCP server:* `ops`" in shown
        actions = _actions(card.blocks)
        assert [a for a in actions if a.startswith(ACTION_OPTION)] == [
            f"{ACTION_OPTION}:{i}" for i in range(3)
        ]
        assert f"{ACTION_ELICIT}:d" in actions and f"{ACTION_ELICIT}:c" in actions

        await h.click(ALICE, card.ts, f"{ACTION_OPTION}:1", value="1")

        assert h.texts(asked.ts)[-1] == "Tool said: picked accept {'region': 'us'}"
        assert [c["arguments"]["state"] for c in ops.calls("pick")] == [None, "pick"]
        [answered] = [e for e in await h.store.recent_audit() if e.action == "answered"]
        assert answered.user == ALICE and "[MCP ops: question of its tool pick]" in answered.detail


@pytest.mark.parametrize(("suffix", "action"), [("d", "decline"), ("c", "cancel")])
async def test_decline_and_cancel_buttons_reach_the_server_as_such(
    make_bot: BotFactory, ops: Ops, suffix: str, action: str
) -> None:
    async with _bot(make_bot, _ungated(ops), SCALE) as h:
        asked = await h.mention(ALICE, "scale api")
        card = h.card(asked.ts)
        await h.click(ALICE, card.ts, f"{ACTION_ELICIT}:{suffix}", value=action)
        assert h.texts(asked.ts)[-1] == f"Tool said: scale of api: {action}"
        [_, retry] = ops.calls("scale")
        assert retry["arguments"]["responses"] == {"replicas": {"action": action}}


async def test_several_fields_are_a_modal_checked_against_the_servers_schema(
    make_bot: BotFactory, ops: Ops
) -> None:
    async with _bot(make_bot, _ungated(ops), SCALE) as h:
        asked = await h.mention(ALICE, "scale api")
        card = h.card(asked.ts)
        assert "How many replicas of api?" in json.dumps(card.blocks)
        await h.click(ALICE, card.ts, ACTION_ANSWER, value="form")
        [view] = list(h.slack.views.values())
        inputs = {
            b["label"]["text"]: b["block_id"] for b in view.view["blocks"] if b["type"] == "input"
        }
        assert sorted(inputs) == ["Reason", "Replicas"]

        refused = await h.slack.submit_view(
            ALICE, view.id, {inputs["Replicas"]: "11", inputs["Reason"]: "load"}
        )
        body = refused.json()
        assert body["response_action"] == "errors" and list(body["errors"]) == [inputs["Replicas"]]
        await h.bot.drain()
        assert len(ops.calls("scale")) == 1  # nothing reached the server

        await h.slack.submit_view(
            ALICE, view.id, {inputs["Replicas"]: "3", inputs["Reason"]: "load"}
        )
        await h.bot.drain()
        assert h.texts(asked.ts)[-1] == "Tool said: scaled api to 3"
        [_, retry] = ops.calls("scale")
        assert retry["arguments"]["responses"] == {
            "replicas": {"action": "accept", "content": {"replicas": 3, "reason": "load"}}
        }


async def test_a_second_round_is_a_new_card_in_the_same_thread(
    make_bot: BotFactory, ops: Ops
) -> None:
    async with _bot(make_bot, _ungated(ops), SCALE) as h:
        asked = await h.mention(ALICE, "scale api")
        first = h.card(asked.ts)
        await h.click(ALICE, first.ts, ACTION_ANSWER, value="form")
        [view] = list(h.slack.views.values())
        inputs = {
            b["label"]["text"]: b["block_id"] for b in view.view["blocks"] if b["type"] == "input"
        }
        await h.slack.submit_view(ALICE, view.id, {inputs["Replicas"]: "8", inputs["Reason"]: ""})
        await h.bot.drain()
        cards = h.cards(asked.ts)
        assert len(cards) == 2 and cards[1].ts != first.ts
        assert "8 replicas is a lot. Sure?" in json.dumps(cards[1].blocks)
        await h.click(ALICE, cards[1].ts, f"{ACTION_OPTION}:0", value="0")
        assert h.texts(asked.ts)[-1] == "Tool said: scaled api to 8 (sure: yes)"
        assert len(ops.calls("scale")) == 3


def _ephemeral_cards(h: Harness, user: str, thread_ts: str) -> list[Ephemeral]:
    return [e for e in h.slack.ephemerals_for(user) if e.thread_ts == thread_ts and e.blocks]


async def test_url_mode_is_an_ephemeral_card_to_the_requester_with_host_and_open_link(
    make_bot: BotFactory, ops: Ops
) -> None:
    login = {"name": "ops_login", "arguments": {"url": "https://auth.example.com/login?t=1"}}
    async with _bot(make_bot, _ungated(ops), login) as h:
        asked = await h.mention(ALICE, "log in")
        assert h.cards(asked.ts) == []  # no public card: the link is the requester's
        assert _ephemeral_cards(h, BOB, asked.ts) == []
        [card] = _ephemeral_cards(h, ALICE, asked.ts)
        shown = json.dumps(card.blocks)
        assert "*Opens:* `auth.example.com`" in shown
        [link] = [
            e for b in card.blocks if b["type"] == "actions" for e in b["elements"] if "url" in e
        ]
        assert link["url"] == "https://auth.example.com/login?t=1"
        assert f"{ACTION_ELICIT}:d" in _actions(card.blocks)

        await h.click(ALICE, card.message_ts, f"{ACTION_ELICIT}:a", value="done")

        assert h.texts(asked.ts)[-1] == "Tool said: login: accept"
        # chat.update cannot find an ephemeral message: the click's response_url replaced it.
        [replaced] = _ephemeral_cards(h, ALICE, asked.ts)
        assert replaced.message_ts == card.message_ts
        assert _actions(replaced.blocks) == [] and f"<@{ALICE}>" in json.dumps(replaced.blocks)
        assert not [c for c in calls_to(h.slack, "chat.update") if "auth.example" in str(c)]


@pytest.mark.parametrize(("suffix", "action"), [("d", "decline"), ("c", "cancel")])
async def test_url_mode_decline_and_cancel_reach_the_server_as_such(
    make_bot: BotFactory, ops: Ops, suffix: str, action: str
) -> None:
    login = {"name": "ops_login", "arguments": {"url": "https://auth.example.com/login"}}
    async with _bot(make_bot, _ungated(ops), login) as h:
        asked = await h.mention(ALICE, "log in")
        [card] = _ephemeral_cards(h, ALICE, asked.ts)
        await h.click(ALICE, card.message_ts, f"{ACTION_ELICIT}:{suffix}", value=action)
        assert h.texts(asked.ts)[-1] == f"Tool said: login: {action}"
        [replaced] = _ephemeral_cards(h, ALICE, asked.ts)
        assert _actions(replaced.blocks) == []


async def test_an_http_link_is_declined_without_a_card(make_bot: BotFactory, ops: Ops) -> None:
    login = {"name": "ops_login", "arguments": {"url": "http://auth.example.com/login"}}
    async with _bot(make_bot, _ungated(ops), login) as h:
        asked = await h.mention(ALICE, "log in")
        assert h.cards(asked.ts) == []
        assert h.texts(asked.ts)[-1] == (
            "Tool said: (handback declined the ops server's request to open "
            '"http://auth.example.com/login": only https links are offered to people.) '
            "login: decline"
        )


async def test_only_the_requester_answers_unless_the_server_names_answerers(
    make_bot: BotFactory, ops: Ops
) -> None:
    async with _bot(make_bot, _ungated(ops), PICK) as h:
        asked = await h.mention(ALICE, "pick a region")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, f"{ACTION_OPTION}:0", value="0")
        assert len(ops.calls("pick")) == 1  # refused: nothing reached the server
        assert any("their request" in text for text in h.ephemerals(BOB))
    ops.log.unlink()
    anyone = ops.stdio(approvals={"pick": False}, answerers=["anyone"])
    async with _bot(make_bot, anyone, PICK) as h:
        asked = await h.mention(ALICE, "pick a region")
        await h.click(BOB, h.card(asked.ts).ts, f"{ACTION_OPTION}:2", value="2")
        assert h.texts(asked.ts)[-1] == "Tool said: picked accept {'region': 'ap'}"


async def test_the_card_expires_no_later_than_the_servers_request_state(
    make_bot: BotFactory, ops: Ops
) -> None:
    server = ops.stdio(approvals={"pick": False}, request_state_ttl=120.0)
    async with _bot(make_bot, server, PICK) as h:
        before = time.time()
        asked = await h.mention(ALICE, "pick a region")
        iid = h.interaction_id(h.card(asked.ts))
        stored = await h.store.get_interaction(iid)
        assert stored is not None
        # Wall clocks only: the harness's clock stands still, the server's state does not wait.
        # The state lives 120 s from when the server made it: the card must not outlive it,
        # however long the answer took to come back (seconds, under load).
        [made] = [call["at"] for call in ops.calls("pick")]
        assert stored.expires_at <= made + 120
        # Earlier only by the round's latency: counted from no earlier than the mention.
        assert stored.expires_at >= before + 120
