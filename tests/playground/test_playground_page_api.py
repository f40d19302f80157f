"""The page server's files and JSON endpoints, against the real bot on the demo model."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.web.async_client import AsyncWebClient

import bot.playground
from bot import chatops
from bot.playground import APPROVERS, EXAMPLES, Playground

from .conftest import (
    WAIT_SECONDS,
    PageClient,
    bot_replies,
    card_with,
    element,
)


@pytest.fixture
async def page(playground: Playground) -> AsyncIterator[PageClient]:
    async with aiohttp.ClientSession() as session:
        yield PageClient(session, playground.url)


async def start(page: PageClient, text: str, user: str = "U0ALICE") -> str:
    status, body = await page.post(
        "/api/messages", {"user": user, "channel": "C0DEPLOYS", "text": text}
    )
    assert status == 200, body
    return str(body["ts"])


def test_public_names_are_sorted_and_exist() -> None:
    exported = list(bot.playground.__all__)
    # isort-style, as ruff's RUF022 sorts: CONSTANTS, then Classes, then functions.
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    for name in exported:
        assert hasattr(bot.playground, name)


async def test_files_are_served_with_a_strict_policy(page: PageClient) -> None:
    async with page.session.get(page.base + "/") as response:
        assert response.status == 200
        assert response.content_type == "text/html"
        assert "script-src" not in response.headers["Content-Security-Policy"]
        assert "default-src 'self'" in response.headers["Content-Security-Policy"]
        html = await response.text()
    assert "/static/playground.js" in html and "http" not in html.split("<body>")[0]
    for name, kind in [("playground.js", "text/javascript"), ("playground.css", "text/css")]:
        async with page.session.get(f"{page.base}/static/{name}") as response:
            assert (response.status, response.content_type) == (200, kind)
            # Nothing may be fetched from the internet: no absolute URLs to other hosts.
            assert not re.search(r"(src|href)=\"(https?:)?//", await response.text())
    script = await (await page.session.get(page.base + "/static/playground.js")).text()
    assert "innerHTML" not in script and "eval(" not in script
    for bad in ["_page.py", "..%2F_page.py", "missing.js"]:
        async with page.session.get(f"{page.base}/static/{bad}") as response:
            assert response.status == 404


async def test_state_describes_the_workspace(page: PageClient) -> None:
    state = await page.state("nobody")
    assert state["default_user"] == "U0ALICE"
    assert state["default_channel"] == "C0DEPLOYS"
    assert state["model"] == {"label": "offline demo model", "offline": True}
    assert state["examples"] == list(EXAMPLES)
    roles = {u["name"]: u["role"] for u in state["users"]}
    assert roles["alice"] == "requester"
    assert {u["id"] for u in state["users"] if u["role"] == "approver"} == set(APPROVERS)
    assert {"id": "C0DEPLOYS", "name": "deploys"} in state["channels"]
    assert state["messages"] == [] and state["views"] == []


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"user": "U0ALICE", "channel": "C0DEPLOYS"}, "bad request body"),
        ({"user": "U0ALICE", "channel": "C0DEPLOYS", "text": ""}, "bad request body"),
        ({"user": "U0NOBODY", "channel": "C0DEPLOYS", "text": "hi"}, "no person 'U0NOBODY'"),
        ({"user": "U0HANDBACK", "channel": "C0DEPLOYS", "text": "hi"}, "no person"),
        ({"user": "U0ALICE", "channel": "C0NOPE", "text": "hi"}, "no channel 'C0NOPE'"),
    ],
)
async def test_bad_messages_are_refused(page: PageClient, body: dict[str, Any], error: str) -> None:
    status, answer = await page.post("/api/messages", body)
    assert status == 400
    assert answer["ok"] is False and error in answer["error"]
    assert (await page.state("U0ALICE"))["messages"] == []


async def test_refusals_are_shown_only_to_whoever_clicked(page: PageClient) -> None:
    ts = await start(page, "deploy api 2.3 to prod")
    card = await page.wait_for("U0DAVE", lambda s: next(iter(bot_replies(s, "hb:approve")), None))
    assert card["thread_ts"] == ts
    status, clicked = await page.post(
        "/api/actions",
        {
            "user": "U0DAVE",
            "channel": "C0DEPLOYS",
            "message_ts": card["ts"],
            "action": {"action_id": "hb:approve", "type": "button", "value": "approve"},
        },
    )
    assert (status, clicked) == (200, {"ok": True, "status": 200})

    def refusal(state: dict[str, Any]) -> Any:
        return [m for m in state["messages"] if m.get("ephemeral_to")]

    shown = await page.wait_for("U0DAVE", refusal)
    assert shown[0]["ephemeral_to"] == "U0DAVE"
    assert "not on the list" in shown[0]["text"]
    assert refusal(await page.state("U0ALICE")) == []
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"


async def test_clicks_on_missing_elements_are_refused(page: PageClient) -> None:
    ts = await start(page, "deploy api 2.3 to prod")
    status, answer = await page.post(
        "/api/actions",
        {
            "user": "U0BOB",
            "channel": "C0DEPLOYS",
            "message_ts": ts,
            "action": {"action_id": "hb:approve", "type": "button"},
        },
    )
    assert status == 400 and "no element with action_id 'hb:approve'" in answer["error"]


async def test_a_select_answers_by_option(page: PageClient) -> None:
    await start(page, "deploy web to staging")
    question = await page.wait_for(
        "U0ALICE", lambda s: next(iter(bot_replies(s, "Which version of web")), None)
    )
    select = next(
        item
        for block in question["blocks"]
        for item in [*block.get("elements", []), block.get("accessory") or {}]
        if item.get("type") == "static_select"
    )
    option = next(o for o in select["options"] if o["text"]["text"] == "2.2.1")
    status, clicked = await page.post(
        "/api/actions",
        {
            "user": "U0ALICE",
            "channel": "C0DEPLOYS",
            "message_ts": question["ts"],
            "action": {
                "action_id": select["action_id"],
                "type": "static_select",
                "selected_option": option,
            },
        },
    )
    assert (status, clicked["ok"]) == (200, True)
    card = await page.wait_for("U0ALICE", lambda s: next(iter(bot_replies(s, "hb:approve")), None))
    assert '"version": "2.2.1"' in str(card["blocks"]).replace("\\n", "\n").replace("'", '"')


async def test_modal_errors_come_back_then_an_answer_closes_it(page: PageClient) -> None:
    await start(page, "write a release note")
    question = await page.wait_for(
        "U0ALICE", lambda s: next(iter(bot_replies(s, "What changed in this release?")), None)
    )
    button = next(
        item
        for block in question["blocks"]
        for item in block.get("elements", [])
        if item.get("type") == "button"
    )
    status, _ = await page.post(
        "/api/actions",
        {
            "user": "U0ALICE",
            "channel": "C0DEPLOYS",
            "message_ts": question["ts"],
            "action": {"action_id": button["action_id"], "type": "button"},
        },
    )
    assert status == 200
    view = await page.wait_for("U0ALICE", lambda s: next(iter(s["views"]), None))
    assert (await page.state("U0BOB"))["views"] == []
    block = next(b for b in view["view"]["blocks"] if b["type"] == "input")
    action_id = block["element"]["action_id"]

    def values(text: str | None) -> dict[str, Any]:
        return {block["block_id"]: {action_id: {"type": block["element"]["type"], "value": text}}}

    status, other = await page.post(
        "/api/views/submit", {"user": "U0BOB", "view_id": view["id"], "values": values("x")}
    )
    assert status == 400 and "was opened for 'U0ALICE'" in other["error"]

    status, rejected = await page.post(
        "/api/views/submit", {"user": "U0ALICE", "view_id": view["id"], "values": values(None)}
    )
    assert status == 200 and rejected["response_action"] == "errors"
    assert list(rejected["errors"]) == [block["block_id"]]
    assert [v["id"] for v in (await page.state("U0ALICE"))["views"]] == [view["id"]]

    status, accepted = await page.post(
        "/api/views/submit",
        {"user": "U0ALICE", "view_id": view["id"], "values": values("Faster deploys")},
    )
    assert (status, accepted) == (200, {"ok": True, "status": 200})
    assert (await page.state("U0ALICE"))["views"] == []
    # The bot escapes the model's text for mrkdwn, as Slack itself stores `>`.
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "&gt; :memo: Faster deploys"))


async def test_closing_a_modal(page: PageClient) -> None:
    await start(page, "write a release note")
    question = await page.wait_for(
        "U0ALICE", lambda s: next(iter(bot_replies(s, "What changed in this release?")), None)
    )
    button = next(
        item
        for block in question["blocks"]
        for item in block.get("elements", [])
        if item.get("type") == "button"
    )
    await page.post(
        "/api/actions",
        {
            "user": "U0ALICE",
            "channel": "C0DEPLOYS",
            "message_ts": question["ts"],
            "action": {"action_id": button["action_id"], "type": "button"},
        },
    )
    view = await page.wait_for("U0ALICE", lambda s: next(iter(s["views"]), None))
    status, answer = await page.post("/api/views/close", {"user": "U0BOB", "view_id": view["id"]})
    assert status == 400
    status, answer = await page.post("/api/views/close", {"user": "U0ALICE", "view_id": view["id"]})
    assert (status, answer) == (200, {"ok": True})
    assert (await page.state("U0ALICE"))["views"] == []
    still = next(m for m in (await page.state("U0ALICE"))["messages"] if m["ts"] == question["ts"])
    assert element(still, button["action_id"]) is not None


async def test_a_thread_reply_answers_a_free_text_question(page: PageClient) -> None:
    ts = await start(page, "write a release note")
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "What changed in this release?"))
    status, body = await page.post(
        "/api/messages",
        {"user": "U0CAROL", "channel": "C0DEPLOYS", "text": "Rollbacks", "thread_ts": ts},
    )
    assert status == 200, body
    answer = await page.wait_for(
        "U0ALICE", lambda s: next(iter(bot_replies(s, ":memo: Rollbacks")), None)
    )
    assert answer["thread_ts"] == ts
    mine = next(m for m in (await page.state("U0ALICE"))["messages"] if m["ts"] == body["ts"])
    # A reply in a thread is plain, as in Slack: no mention is added.
    assert mine["text"] == "Rollbacks"


async def test_two_approvers_at_once_one_wins_the_other_is_told(page: PageClient) -> None:
    # staging needs one approver (prod needs two: see the two-person test below).
    await start(page, "deploy api 2.3 to staging")
    card = await page.wait_for("U0BOB", lambda s: next(iter(bot_replies(s, "hb:approve")), None))

    def click(user: str) -> Any:
        return page.post(
            "/api/actions",
            {
                "user": user,
                "channel": "C0DEPLOYS",
                "message_ts": card["ts"],
                "action": {"action_id": "hb:approve", "type": "button", "value": "approve"},
            },
        )

    answers = await asyncio.gather(click("U0BOB"), click("U0CAROL"))
    assert [status for status, _ in answers] == [200, 200]

    def told(state: dict[str, Any]) -> Any:
        return [m for m in state["messages"] if m.get("ephemeral_to") and "already" in m["text"]]

    answered = await page.wait_for(
        "U0ALICE", lambda s: next(iter(bot_replies(s, "Approved* by <@U0")), None)
    )
    winner = "U0BOB" if "<@U0BOB>" in str(answered["blocks"]) else "U0CAROL"
    loser = "U0CAROL" if winner == "U0BOB" else "U0BOB"
    notice = await page.wait_for(loser, told)
    assert len(notice) == 1 and notice[0]["ephemeral_to"] == loser
    assert told(await page.state(winner)) == []
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed api 2.3 to staging"))
    assert chatops.fleet.versions[("api", "staging")] == "2.3"


async def test_a_prod_deploy_waits_for_bob_and_carol(page: PageClient) -> None:
    """The demo as a first-time user tries it: alice asks to deploy to prod, bob approves (the
    card says 1 of 2 and stays open), carol approves, and only then does it run."""
    await start(page, "deploy api 2.3 to prod")
    card = await page.wait_for("U0BOB", lambda s: next(iter(bot_replies(s, "hb:approve")), None))

    async def approve(user: str) -> None:
        status, clicked = await page.post(
            "/api/actions",
            {
                "user": user,
                "channel": "C0DEPLOYS",
                "message_ts": card["ts"],
                "action": {"action_id": "hb:approve", "type": "button", "value": "approve"},
            },
        )
        assert (status, clicked["ok"]) == (200, True)

    def shown(state: dict[str, Any]) -> Any:
        return next(m for m in state["messages"] if m["ts"] == card["ts"])

    await approve("U0BOB")
    progress = await page.wait_for(
        "U0CAROL", lambda s: "1 of 2 approved:* <@U0BOB>" in str(shown(s)["blocks"]) or None
    )
    assert progress
    assert element(shown(await page.state("U0CAROL")), "hb:approve") is not None
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"

    await approve("U0CAROL")
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed api 2.3 to prod"))
    assert chatops.fleet.versions[("api", "prod")] == "2.3"
    closed = shown(await page.state("U0ALICE"))
    assert "Approved* by <@U0BOB> and <@U0CAROL>" in str(closed["blocks"])
    assert element(closed, "hb:approve") is None


async def test_the_page_shows_the_session_and_its_stop_is_checked(page: PageClient) -> None:
    ts = await start(page, "deploy api 2.3 to prod")

    def suspended(state: dict[str, Any]) -> Any:
        return [s for s in state["statuses"] if s["thread_ts"] == ts and s["status"] == "suspended"]

    [session] = await page.wait_for("U0ALICE", suspended)
    assert session["title"] == "deploy api 2.3 to prod"
    # The stream held nothing but the paused call: it is gone, and the card is the request.
    assert [m for m in bot_replies(await page.state("U0ALICE"), "") if m["chunks"]] == []

    status, answer = await page.post(
        "/api/stop", {"user": "U0ALICE", "channel": "C0DEPLOYS", "thread_ts": "1.0"}
    )
    assert status == 400 and "no thread '1.0'" in answer["error"]
    status, answer = await page.post(
        "/api/stop", {"user": "U0NOBODY", "channel": "C0DEPLOYS", "thread_ts": ts}
    )
    assert status == 400 and "no person" in answer["error"]
    status, answer = await page.post(
        "/api/stop", {"user": "U0ALICE", "channel": "C0DEPLOYS", "thread_ts": ts}
    )
    assert (status, answer) == (200, {"ok": True, "status": 200})

    def cancelled(state: dict[str, Any]) -> Any:
        return bot_replies(state, "stopped by")

    [card] = await page.wait_for("U0ALICE", cancelled)
    assert element(card, "hb:approve") is None
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"


async def test_a_composer_message_starting_with_a_slash_is_a_slash_command(
    page: PageClient,
) -> None:
    status, body = await page.post(
        "/api/messages", {"user": "U0ALICE", "channel": "C0DEPLOYS", "text": "/deploy api 2.3 prod"}
    )
    assert (status, body["command"], body["status"]) == (200, "/deploy", 200)
    # The echo shows the parsed arguments, never the typed text (which may hold a secret).
    echo = "<@U0ALICE> ran /deploy service=api version=2.3 environment=prod"
    opening = await page.wait_for(
        "U0ALICE",
        lambda s: next((m for m in s["messages"] if m["text"] == echo), None),
    )
    card = await page.wait_for(
        "U0ALICE",
        lambda s: next(
            (m for m in s["messages"] if m.get("thread_ts") == opening["ts"] and m.get("blocks")),
            None,
        ),
    )
    assert "deploy" in card["text"]
    status, body = await page.post(
        "/api/messages", {"user": "U0ALICE", "channel": "C0DEPLOYS", "text": "/deploy api"}
    )
    assert status == 200
    # Missing arguments: the tool's form opens for the person, pre-filled with what they typed.
    form = await page.wait_for(
        "U0ALICE",
        lambda s: next((v for v in s["views"] if v["user"] == "U0ALICE"), None),
    )
    assert form["view"]["callback_id"] == "hb:command_modal"
    assert "Missing `version`, `environment`." in form["view"]["blocks"][0]["text"]["text"]


async def test_app_home_opens_and_answers_without_a_channel(page: PageClient) -> None:
    await start(page, "deploy api 2.3 to staging")
    await page.wait_for("U0BOB", lambda s: next(iter(bot_replies(s, "hb:approve")), None))
    assert (await page.state("U0BOB"))["home"] is None

    status, opened = await page.post("/api/home/open", {"user": "U0BOB"})
    assert (status, opened) == (200, {"ok": True, "status": 200})
    home = await page.wait_for("U0BOB", lambda s: s["home"])
    [actions] = [b for b in home["blocks"] if b["type"] == "actions"]
    approve = next(e for e in actions["elements"] if e["action_id"] == "hb:approve")

    action = {**approve, "block_id": actions["block_id"]}
    status, clicked = await page.post("/api/home/actions", {"user": "U0BOB", "action": action})
    assert (status, clicked) == (200, {"ok": True, "status": 200})
    await page.wait_for(
        "U0BOB",
        lambda s: (
            "Recently decided" in str(s["home"])
            and "Approved" in str(s["home"])
            and not any(b["type"] == "actions" for b in s["home"]["blocks"])
        ),
    )
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed api 2.3 to staging"))

    status, refused = await page.post("/api/home/open", {"user": "U0NOBODY"})
    assert status == 400 and "no person" in refused["error"]
    status, missing = await page.post(
        "/api/home/actions",
        {"user": "U0DAVE", "action": {"action_id": "hb:approve", "type": "button"}},
    )
    assert status == 400 and "no Home view" in missing["error"]


CHANNEL = "C0DEPLOYS"


async def raw_post(page: PageClient, path: str, data: bytes | str) -> tuple[int, str, str]:
    headers = {"Content-Type": "application/json"}
    async with page.session.post(f"{page.base}{path}", data=data, headers=headers) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


ENDPOINTS = ["/api/messages", "/api/actions", "/api/views/submit", "/api/views/close"]


MALFORMED: list[bytes] = [
    b"",
    b"not json",
    b"\xff\xfe\x00",
    b"null",
    b"[]",
    b"42",
    b'"text"',
    b'{"user": ["U0ALICE"], "channel": {}, "text": 5}',
    b'{"user": "U0ALICE"}',
    b"{" * 10_000,
    b"[" * 100_000 + b"]" * 100_000,
]


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("body", MALFORMED, ids=range(len(MALFORMED)))
async def test_malformed_bodies_are_400_json(page: PageClient, path: str, body: bytes) -> None:
    status, content_type, text = await raw_post(page, path, body)
    assert status == 400, text
    assert content_type.startswith("application/json")
    assert json.loads(text)["ok"] is False
    assert "Traceback" not in text


@pytest.mark.parametrize(
    "values",
    [
        {"b": {"a": {"selected_options": [1, None, "x"]}}},
        {"b": {"a": {"selected_option": "not an option"}}},
        {"b": {"a": {"selected_option": {"value": 5}}}},
        {"b": {"a": {"selected_options": {"value": "0"}}}},
        {"b": {"a": {"selected_options": [{"value": ["0"]}]}}},
        {"b": {"a": {"value": {"nested": True}}}},
    ],
)
async def test_malformed_modal_values_are_400_not_500(
    page: PageClient, values: dict[str, Any]
) -> None:
    # A real open view, so the request gets as far as reading the values.
    await start(page, "write a release note")
    card = await page.wait_for("U0ALICE", lambda s: card_with(s, "hb:answer", "What changed"))
    status, _ = await page.post(
        "/api/actions",
        {
            "user": "U0ALICE",
            "channel": CHANNEL,
            "message_ts": card["ts"],
            "action": {"action_id": "hb:answer", "type": "button", "value": "form"},
        },
    )
    assert status == 200
    views = await page.wait_for("U0ALICE", lambda s: s["views"])
    view_id = views[0]["id"]
    status, body = await page.post(
        "/api/views/submit", {"user": "U0ALICE", "view_id": view_id, "values": values}
    )
    assert status == 400, body
    assert body["ok"] is False
    # The view is still open: nothing was submitted.
    assert (await page.state("U0ALICE"))["views"][0]["id"] == view_id


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("/api/messages", {"user": "U0NOBODY", "channel": CHANNEL, "text": "hi"}, "no person"),
        ("/api/messages", {"user": "U0HANDBACK", "channel": CHANNEL, "text": "hi"}, "no person"),
        ("/api/messages", {"user": "U0ALICE", "channel": "C0NOPE", "text": "hi"}, "no channel"),
        ("/api/messages", {"user": "U0ALICE", "channel": CHANNEL, "text": ""}, "bad request"),
        (
            "/api/actions",
            {
                "user": "U0ALICE",
                "channel": CHANNEL,
                "message_ts": "1.000001",
                "action": {"action_id": "hb:approve", "type": "button"},
            },
            "no message",
        ),
        (
            "/api/actions",
            {
                "user": "U0NOBODY",
                "channel": CHANNEL,
                "message_ts": "1.000001",
                "action": {"action_id": "hb:approve", "type": "button"},
            },
            "no person",
        ),
        ("/api/views/submit", {"user": "U0ALICE", "view_id": "VNOPE"}, "no open view"),
        ("/api/views/close", {"user": "U0ALICE", "view_id": "VNOPE"}, "no open view"),
    ],
)
async def test_unknown_people_messages_and_views_are_400(
    page: PageClient, path: str, body: dict[str, Any], error: str
) -> None:
    status, answer = await page.post(path, body)
    assert status == 400
    assert answer["ok"] is False and error in answer["error"]


async def test_wrong_methods_and_paths_are_not_server_errors(page: PageClient) -> None:
    for method, path in [
        ("GET", "/api/messages"),
        ("PUT", "/api/actions"),
        ("POST", "/api/state"),
        ("GET", "/static/..%2f_page.py"),
        ("GET", "/static/_page.py"),
        ("GET", "/api/nothing"),
    ]:
        async with page.session.request(method, f"{page.base}{path}") as response:
            assert response.status in (404, 405), (method, path, response.status)
            assert "Traceback" not in await response.text()


async def test_state_for_an_unknown_viewer_falls_back_to_a_person(page: PageClient) -> None:
    for viewer in ("U0NOBODY", "", "U0HANDBACK", "<script>"):
        state = await page.state(viewer)
        assert state["default_user"] == "U0ALICE"


async def test_a_very_long_message_reaches_the_bot(page: PageClient) -> None:
    text = "deploy " + "🚀 long " * 4_900
    assert len(text) <= 40_000
    ts = await start(page, text)
    state = await page.wait_for(
        "U0ALICE",
        lambda s: [m for m in s["messages"] if m.get("thread_ts") == ts and m["user"] != "U0ALICE"],
    )
    assert state
    status, body = await page.post(
        "/api/messages", {"user": "U0ALICE", "channel": CHANNEL, "text": "x" * 40_001}
    )
    assert status == 400 and body["ok"] is False


async def test_a_dropped_live_feed_is_released_and_a_new_one_sees_later_changes(
    playground: Playground, page: PageClient
) -> None:
    slack = playground.slack
    assert slack is not None
    before = len(slack._subscribers)
    async with page.session.get(f"{page.base}/api/events") as events:
        await events.content.readline()
        assert len(slack._subscribers) == before + 1
    # The server notices the drop at its next write, the next change, and lets the queue go.
    await start(page, "status")
    async with asyncio.timeout(WAIT_SECONDS):
        while len(slack._subscribers) > before:
            await slack.wait_for(lambda: True)
            await asyncio.sleep(0.05)
    # A reconnecting page re-reads the whole state, so what it missed is there.
    state = await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Here is what runs where"))
    assert state


async def test_blank_and_emoji_messages_get_the_help_in_the_playground(page: PageClient) -> None:
    for text in (" ", "🙂"):
        status, body = await page.post(
            "/api/messages", {"user": "U0ALICE", "channel": CHANNEL, "text": text}
        )
        assert status == 200, body
        await page.wait_for(
            "U0ALICE",
            lambda s, ts=body["ts"]: [
                m for m in bot_replies(s, "offline demo model") if m.get("thread_ts") == ts
            ],
        )


async def test_an_ephemeral_card_is_clicked_by_whoever_sees_it_alone(
    page: PageClient, playground: Playground
) -> None:
    slack = playground.slack
    assert slack is not None
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    button = {
        "type": "button",
        "action_id": "hb:link",
        "text": {"type": "plain_text", "text": "Go"},
    }
    posted = await client.chat_postEphemeral(
        channel="C0DEPLOYS",
        user="U0ALICE",
        text="only alice",
        blocks=[{"type": "actions", "block_id": "b", "elements": [button]}],
    )
    click = {
        "channel": "C0DEPLOYS",
        "message_ts": posted["message_ts"],
        "ephemeral": True,
        "action": {"action_id": "hb:link", "type": "button"},
    }
    status, answer = await page.post("/api/actions", {"user": "U0ALICE", **click})
    assert (status, answer["ok"]) == (200, True)
    status, answer = await page.post("/api/actions", {"user": "U0BOB", **click})
    assert status == 400 and "no message" in answer["error"]
