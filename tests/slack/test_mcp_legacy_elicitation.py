"""A server on the older protocol asks during the call (`elicitation/create`, the SDK's
`ctx.elicit`), served by real `handback run` processes and a real SDK server over stdio: the
card says the question cannot outlive a restart; accept (buttons or a modal checked against the
server's schema), decline and cancel reach the server as such, the answer taken from the store
by the process holding the call; a URL question is the requester's ephemeral card, completed by
the server's `notifications/elicitation/complete`; after a kill -9 the call is reported
interrupted and the card says the question ended with the restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blocks import ACTION_ANSWER, ACTION_ELICIT, ACTION_OPTION
from state import open_store

from .._local_slack import Ephemeral, TestSlack
from ..mcp.conftest import Ops, ops_in, until
from .conftest import ALICE, BOB, CHANNEL
from .durable import answer_in, card_in, cards, interaction_id
from .processes import Fleet

pytestmark = pytest.mark.slow

AGENT = "tests.slack.legacy_agent:agent"


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


def _env(ops: Ops) -> dict[str, str]:
    done = ops.log.with_name("done")
    return {"OPS_LOG": str(ops.log), "OPS_PID": str(ops.pid), "LEGACY_DONE": str(done)}


def _answered(ops: Ops, tool: str) -> list[dict[str, object]]:
    return [c for c in ops.calls(tool) if c.get("phase") == "answered"]


def _actions(blocks: list[dict[str, object]]) -> list[str]:
    return [
        str(element["action_id"])
        for block in blocks
        if block["type"] == "actions"
        for element in block["elements"]  # type: ignore[attr-defined]
    ]


def _ephemeral_cards(slack: TestSlack, user: str, thread_ts: str) -> list[Ephemeral]:
    return [e for e in slack.ephemerals_for(user) if e.thread_ts == thread_ts and e.blocks]


async def test_answers_given_while_the_call_is_open_reach_the_server_as_given(
    store_url: str, ops: Ops
) -> None:
    async with (
        TestSlack() as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(ops)) as fleet,
    ):
        await fleet.start("web", "worker", "worker")

        # One list: buttons. The card says the question lives only as long as the call.
        first = await slack.post_user_message(ALICE, CHANNEL, "pick a region")
        card = await card_in(slack, first.ts)
        shown = json.dumps(card.blocks)
        assert "after a restart the call is reported interrupted" in shown
        assert "&lt;!channel&gt;" in shown and "<!channel>" not in shown
        assert f"{ACTION_ELICIT}:d" in _actions(card.blocks)
        assert (await slack.click(BOB, card.ts, f"{ACTION_OPTION}:0", value="0")).status == 200
        await until(lambda: any("their request" in e.text for e in slack.ephemerals_for(BOB)))
        assert _answered(ops, "pick") == []  # refused: not the requester's
        assert (await slack.click(ALICE, card.ts, f"{ACTION_OPTION}:1", value="1")).status == 200
        assert await answer_in(slack, first.ts) == ["Tool said: picked accept {'region': 'us'}"]
        [answered] = _answered(ops, "pick")
        assert answered["action"] == "accept" and answered["data"] == {"region": "us"}
        [closed] = cards(slack, first.ts)
        assert _actions(closed.blocks) == [] and f"<@{ALICE}>" in json.dumps(closed.blocks)

        # Several fields: a modal, checked against the server's schema, errors inline.
        second = await slack.post_user_message(ALICE, CHANNEL, "scale api")
        card = await card_in(slack, second.ts)
        assert (await slack.click(ALICE, card.ts, ACTION_ANSWER, value="form")).status == 200
        await until(lambda: slack.views)
        [view] = list(slack.views.values())
        inputs = {
            b["label"]["text"]: b["block_id"] for b in view.view["blocks"] if b["type"] == "input"
        }
        refused = await slack.submit_view(
            ALICE, view.id, {inputs["Replicas"]: "many", inputs["Reason"]: "load"}
        )
        assert refused.json()["response_action"] == "errors"
        assert list(refused.json()["errors"]) == [inputs["Replicas"]]
        await slack.submit_view(ALICE, view.id, {inputs["Replicas"]: "3", inputs["Reason"]: "load"})
        assert await answer_in(slack, second.ts) == [
            "Tool said: scale of api: accept {'replicas': 3, 'reason': 'load'}"
        ]

        # Decline and Cancel are their own answers.
        for action, suffix in (("decline", "d"), ("cancel", "c")):
            asked = await slack.post_user_message(ALICE, CHANNEL, f"pick ({action})")
            card = await card_in(slack, asked.ts)
            clicked = await slack.click(ALICE, card.ts, f"{ACTION_ELICIT}:{suffix}", value=action)
            assert clicked.status == 200
            assert await answer_in(slack, asked.ts) == [f"Tool said: picked {action} None"]
        assert [c["action"] for c in _answered(ops, "pick")] == ["accept", "decline", "cancel"]
        assert "Traceback" not in fleet.logs()


async def test_a_url_question_is_the_requesters_and_the_servers_notice_completes_it(
    store_url: str, ops: Ops
) -> None:
    async with (
        TestSlack() as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(ops)) as fleet,
    ):
        await fleet.start("all")
        refused = await slack.post_user_message(ALICE, CHANNEL, "login http://auth.example.com/x")
        assert await answer_in(slack, refused.ts) == [
            "Tool said: (handback declined the legacy server's request to open "
            '"http://auth.example.com/x": only https links are offered to people.) '
            "login: decline"
        ]
        assert _ephemeral_cards(slack, ALICE, refused.ts) == []

        asked = await slack.post_user_message(ALICE, CHANNEL, "login https://auth.example.com/x")
        await until(lambda: _ephemeral_cards(slack, ALICE, asked.ts))
        [card] = _ephemeral_cards(slack, ALICE, asked.ts)
        assert cards(slack, asked.ts) == []  # nothing public
        assert "*Opens:* `auth.example.com`" in json.dumps(card.blocks)
        assert [c["action"] for c in _answered(ops, "login")] == ["decline"]  # the http one

        ops.log.with_name("done").touch()  # the person finished at the URL
        assert await answer_in(slack, asked.ts) == ["Tool said: login: accept"]
        await until(lambda: any("says this is done" in e.text for e in slack.ephemerals))
        # A click on the stale card learns it is over, and the card is replaced to say so.
        await slack.click(ALICE, card.message_ts, f"{ACTION_ELICIT}:a", value="done")
        await until(lambda: _actions(_ephemeral_cards(slack, ALICE, asked.ts)[0].blocks) == [])
        assert [c["action"] for c in _answered(ops, "login")] == ["decline", "accept"]
        async with open_store(store_url) as store:
            entries = await store.recent_audit()
        [completed] = [e for e in entries if e.action == "answered" and "login" in str(e.detail)]
        assert completed.user == "mcp-server:legacy"
        assert "completed by the server" in str(completed.detail)


async def test_after_a_kill_the_call_is_interrupted_and_the_card_says_the_question_ended(
    store_url: str, ops: Ops
) -> None:
    async with (
        TestSlack() as slack,
        Fleet(slack, store_url, ref=AGENT, env=_env(ops)) as fleet,
    ):
        [first] = await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "pick a region")
        card = await card_in(slack, asked.ts)
        await fleet.kill(first)

        await fleet.start("all")
        [said] = await answer_in(slack, asked.ts, timeout=40)
        assert said.startswith("Tool said: Interrupted: the process stopped while this ran")
        await until(
            lambda: "ended when the bot restarted" in json.dumps(cards(slack, asked.ts)[0].blocks)
        )
        [closed] = cards(slack, asked.ts)
        assert not [a for a in _actions(closed.blocks) if a.startswith(ACTION_OPTION)]
        async with open_store(store_url) as store:
            record = await store.get_interaction(interaction_id(card))
        assert record is not None and record.status == "cancelled"  # nobody can answer it now
        assert _answered(ops, "pick") == []  # the server never got an answer
        assert len([c for c in ops.calls("pick") if c.get("phase") == "asking"]) == 1


async def test_an_unanswered_question_expires_and_the_server_gets_cancel(
    sqlite_store_url: str, ops: Ops
) -> None:
    ttl = {"HANDBACK_INTERACTION_TTL": "3", "HANDBACK_SWEEP_INTERVAL": "0.5"}
    async with (
        TestSlack() as slack,
        Fleet(slack, sqlite_store_url, ref=AGENT, env={**_env(ops), **ttl}) as fleet,
    ):
        await fleet.start("all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "pick a region")
        card = await card_in(slack, asked.ts)
        # Expired by the sweeper, as any card: the process holding the call reads that.
        assert await answer_in(slack, asked.ts, timeout=30) == ["Tool said: picked cancel None"]
        [answered] = _answered(ops, "pick")
        assert answered["action"] == "cancel"
        async with open_store(sqlite_store_url) as store:
            record = await store.get_interaction(interaction_id(card))
            entries = await store.recent_audit()
        assert record is not None and record.status == "expired"
        assert [e.action for e in entries if e.interaction_id == record.interaction_id] == [
            "expired"
        ]
