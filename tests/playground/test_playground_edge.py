"""Adversarial edges of the playground: hostile text in every rendered place, malformed requests,
reconnects, two people at once, odd inputs to the demo model, and `handback dev` failing."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import expect
from slack_sdk.errors import SlackApiError

from bot import chatops
from bot.playground import Playground
from bot.playground._demo_model import demo_reply
from bot.playground._dev import main as dev_main

from .conftest import WAIT_SECONDS, PageClient, bot_replies, element

TIMEOUT = 15_000
CHANNEL = "C0DEPLOYS"
PWN = "window.__pwned=1"
HOSTILE = f"<img src=x onerror={PWN}><script>{PWN}</script>"


@pytest.fixture
async def page(playground: Playground) -> AsyncIterator[PageClient]:
    async with aiohttp.ClientSession() as session:
        yield PageClient(session, playground.url)


async def start(page: PageClient, text: str, user: str = "U0ALICE") -> str:
    status, body = await page.post(
        "/api/messages", {"user": user, "channel": CHANNEL, "text": text}
    )
    assert status == 200, body
    return str(body["ts"])


async def raw_post(page: PageClient, path: str, data: bytes | str) -> tuple[int, str, str]:
    headers = {"Content-Type": "application/json"}
    async with page.session.post(f"{page.base}{path}", data=data, headers=headers) as response:
        return response.status, response.headers.get("Content-Type", ""), await response.text()


def card_with(state: dict[str, Any], action_id: str, text: str = "") -> dict[str, Any] | None:
    for message in bot_replies(state, text):
        if element(message, action_id) is not None:
            return message
    return None


# ------------------------------------------------------------------ the JSON endpoints

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


# ------------------------------------------------------------------ the demo model

ODD_TEXTS = {
    "empty": "",
    "whitespace": " \n\t ",
    "emoji": "🚀🔥🙂",
    "emoji-deploy": "🚀 deploy 🚀",
    "10k": "x" * 10_000,
    "10k-deploy": "please deploy " + "and " * 2_500 + "api",
    "many-dots": "deploy v" + "1." * 20_000,
    "angles": "<" * 40_000,
    "nul": "\x00deploy\x00",
    "rtl": "\u202edeploy api to prod",
}


@pytest.mark.parametrize("name", ODD_TEXTS)
def test_the_demo_model_answers_any_text(name: str) -> None:
    reply = demo_reply([{"role": "user", "content": ODD_TEXTS[name]}])
    assert reply
    if isinstance(reply, str):
        assert "offline demo model" in reply
    else:
        assert reply[0]["name"] in ("ask_user", "deploy")


@pytest.mark.parametrize(
    "history",
    [
        [{"role": "assistant", "tool_calls": [{"id": "1", "function": None}]}],
        [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"arguments": "[1, 2]"}}]}],
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "1", "function": {"name": "ask_user", "arguments": '"question"'}}
                ],
            },
            {"role": "tool", "tool_call_id": "1", "content": "api"},
        ],
        [{"role": "assistant", "tool_calls": ["not a call", None]}],
        [{"role": "tool", "tool_call_id": None, "content": None}],
    ],
)
def test_the_demo_model_survives_an_odd_history(history: list[dict[str, Any]]) -> None:
    reply = demo_reply([{"role": "user", "content": "deploy"}, *history])
    assert reply


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


# ------------------------------------------------------------------ handback dev failing


def test_handback_dev_without_a_writable_temp_dir_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Root can write anywhere, so make the temp "dir" a file: nothing can be created under it.
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocked))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = dev_main(port=0, open_browser=False)
    err = capsys.readouterr().err
    assert code == 2
    assert "cannot listen" not in err
    assert "store" in err and str(blocked) in err
    assert "Traceback" not in err


# ------------------------------------------------------------------ in the browser


async def open_page(page: Any, url: str) -> None:
    expect.set_options(timeout=TIMEOUT)
    await page.goto(url)
    await expect(page.locator("#conn.live")).to_be_visible()


async def say(page: Any, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")
    await expect(page.locator("#thread .thread-parent")).to_contain_text(text)


async def assert_not_pwned(page: Any) -> None:
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("img, script:not([src]), iframe, object, embed").count() == 0
    for href in await page.locator("a").evaluate_all("(links) => links.map((a) => a.href)"):
        assert href.startswith(("http:", "https:", "mailto:")), href


@pytest.mark.browser
async def test_hostile_text_is_inert_everywhere_on_the_page(
    playground: Playground, browser_page: Any
) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    slack = playground.slack
    assert slack is not None
    slack.add_user("U0MALLORY", HOSTILE)
    slack.add_channel("C0EVIL", HOSTILE)
    options = [
        {"text": {"type": "plain_text", "text": f"{HOSTILE} {n}"}, "value": f"<b>{n}</b>"}
        for n in range(3)
    ]
    mrkdwn = (
        f"{HOSTILE} <javascript:{PWN}|click> <JavaScript:{PWN}> <data:text/html,<b>x</b>|d> "
        f"<!date^1700000000^{{date}}|<img src=x onerror={PWN}>> "
        f"<!date^x^<img src=x onerror={PWN}>|y> <@U0MALLORY> <#C0EVIL> "
        f"<@U0BOB|<img src=x onerror={PWN}>> <!subteam^S1|<img src=x onerror={PWN}>> "
        f"`<img src=x onerror={PWN}>` *<img src=x onerror={PWN}>* :<img>: "
        f"```{HOSTILE}``` &lt;img src=x onerror={PWN}&gt;"
    )
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": HOSTILE}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": mrkdwn},
            "fields": [
                {"type": "mrkdwn", "text": HOSTILE},
                {"type": "plain_text", "text": HOSTILE},
            ],
            "accessory": {
                "type": "button",
                "action_id": "x:url",
                "text": {"type": "plain_text", "text": HOSTILE},
                "url": f"javascript:{PWN}",
            },
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": HOSTILE}]},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "static_select",
                    "action_id": "x:s",
                    "options": options,
                    "placeholder": {"type": "plain_text", "text": HOSTILE},
                },
                {"type": "checkboxes", "action_id": "x:c", "options": options},
                {"type": "overflow", "action_id": "x:o", "options": options},
            ],
        },
        {"type": "image", "image_url": "https://example.com/x.png", "alt_text": HOSTILE},
    ]
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    view = {
        "type": "modal",
        "callback_id": "x",
        "title": {"type": "plain_text", "text": HOSTILE[:24]},
        "submit": {"type": "plain_text", "text": HOSTILE[:24]},
        "close": {"type": "plain_text", "text": HOSTILE[:24]},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}},
            {
                "type": "input",
                "block_id": f"<img src=x onerror={PWN}>",
                "label": {"type": "plain_text", "text": HOSTILE},
                "hint": {"type": "plain_text", "text": HOSTILE},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "x:t",
                    "placeholder": {"type": "plain_text", "text": HOSTILE},
                    "initial_value": HOSTILE,
                },
            },
            {
                "type": "input",
                "label": {"type": "plain_text", "text": "pick"},
                "element": {"type": "static_select", "action_id": "x:m", "options": options},
            },
        ],
    }
    try:
        # A block of a type Slack does not know is refused, as Slack refuses it: the page never
        # has to render one.
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(
                channel=CHANNEL, text=mrkdwn, blocks=[{"type": f"<img src=x onerror={PWN}>"}]
            )
        assert refused.value.response["error"] == "invalid_blocks"
        posted = await client.chat_postMessage(channel=CHANNEL, text=mrkdwn, blocks=blocks)
        await client.chat_postMessage(channel=CHANNEL, text=mrkdwn, thread_ts=posted["ts"])
        await client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text=mrkdwn)
        slack.triggers["1.hostile"] = "U0ALICE"
        await client.views_open(trigger_id="1.hostile", view=view)
    finally:
        await client.session.close() if client.session else None

    page = browser_page
    await open_page(page, playground.url + "?as=U0ALICE")
    await expect(page.get_by_role("dialog")).to_be_visible()
    dialog = page.get_by_role("dialog")
    await expect(dialog.locator("textarea, input[type=text]")).to_have_value(HOSTILE)
    await expect(dialog).to_contain_text(HOSTILE)
    await assert_not_pwned(page)
    await dialog.get_by_role("button", name=HOSTILE[:24]).first.click()
    await expect(page.locator("#messages")).to_contain_text(HOSTILE)
    await expect(page.locator("#messages .ephemeral")).to_have_count(1)
    await page.locator("#messages .replies").first.click()
    await expect(page.locator("#thread")).to_contain_text("click")
    # The javascript: button opens nothing and runs nothing.
    await page.locator("#messages [data-action-id='x:url']").click()
    await page.locator("#messages select[data-action-id='x:s']").select_option(index=1)
    await page.locator("#as").select_option("U0MALLORY")
    await expect(page.locator("#people li.active")).to_contain_text(HOSTILE)
    await assert_not_pwned(page)
    assert len(page.context.pages) == 1


@pytest.mark.browser
async def test_picking_in_a_modal_shows_no_error(playground: Playground, browser_page: Any) -> None:
    from bot._cli import load_agent

    agent = load_agent("tests.playground.form_agent:agent")
    async with Playground(agent, environ={}) as form_playground:
        page = browser_page
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        await open_page(page, form_playground.url)
        await say(page, "book a maintenance window")
        card = page.locator("#thread .msg", has_text="When should the maintenance window be?")
        await card.get_by_role("button", name="Answer").click()
        modal = page.get_by_role("dialog")
        await expect(modal).to_be_visible()
        # A reload with the modal open shows it again: views live in the workspace.
        await page.reload()
        await expect(page.locator("#conn.live")).to_be_visible()
        await modal.locator("select").select_option(label="staging")
        await modal.locator("input[type=date]").fill("2030-01-15")
        # Slack sends nothing for an input block's element unless it asks to dispatch actions.
        await modal.locator("input[type=number]").fill("30")
        await modal.locator("input[type=text], textarea").fill("kernel")
        # Anything the changes above sent has been answered by the time the form is.
        await modal.locator("button[type=submit]").click()
        await expect(modal).to_have_count(0)
        await page.locator("#messages .replies").first.click()
        await expect(page.locator("#thread")).to_contain_text("Booked 30 minutes on 2030-01-15")
        assert await page.locator("#toast").is_hidden()
        assert failed == []


@pytest.mark.browser
async def test_two_tabs_act_as_two_people_live(playground: Playground, browser_page: Any) -> None:
    alice = browser_page
    bob = await alice.context.new_page()
    await open_page(alice, playground.url + "?as=U0ALICE")
    await open_page(bob, playground.url + "?as=U0BOB")
    await say(alice, "deploy api 2.3 to staging")  # one approver (prod needs two)

    # bob's tab sees alice's request live, opens the thread and approves there.
    await expect(bob.locator("#messages")).to_contain_text("deploy api 2.3 to staging")
    await bob.locator("#messages .replies").first.click()
    bob_card = bob.locator("#thread .msg", has_text="Approval request")
    alice_card = alice.locator("#thread .msg", has_text="Approval request")
    await expect(alice_card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    # alice may not approve her own request; only she is told.
    await alice_card.get_by_role("button", name="Approve", exact=True).click()
    await expect(alice.locator(".msg.ephemeral")).to_have_count(1)
    await bob_card.get_by_role("button", name="Approve", exact=True).click()
    for tab in (alice, bob):
        await expect(tab.locator("#thread")).to_contain_text("Approved by @bob")
        await expect(tab.locator("#thread")).to_contain_text("Deployed api 2.3 to staging")
    await expect(bob.locator(".msg.ephemeral")).to_have_count(0)
    assert chatops.fleet.versions[("api", "staging")] == "2.3"
    await bob.close()


@pytest.mark.browser
async def test_a_reload_mid_flow_keeps_the_pending_card(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground.url + "?as=U0ALICE")
    await say(page, "deploy web to staging")
    await expect(page.locator("#thread")).to_contain_text("Which version of web")
    await page.reload()
    await expect(page.locator("#conn.live")).to_be_visible()
    await expect(page.locator("#as")).to_have_value("U0ALICE")
    await page.locator("#messages .replies").first.click()
    question = page.locator("#thread .msg", has_text="Which version of web")
    await question.locator("select").select_option(label="2.2")
    card = page.locator("#thread .msg", has_text="Approval request")
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    # The live feed is down across a reload: the page says so, and catches up once it is back.
    async def drop(route: Any) -> None:
        await route.abort()

    await page.route("**/api/events", drop)
    await page.reload()
    await expect(page.locator("#conn")).to_have_text("reconnecting…")
    await page.locator("#messages .replies").first.click()
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    status, _ = await _click_as(playground, "U0CAROL", "Approval request", "hb:approve")
    assert status == 200
    await page.unroute("**/api/events", drop)
    await expect(page.locator("#conn.live")).to_be_visible()
    await expect(page.locator("#thread")).to_contain_text("Approved by @carol")
    await expect(page.locator("#thread")).to_contain_text("Deployed web 2.2 to staging")


async def _click_as(
    playground: Playground, user: str, text: str, action_id: str
) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        client = PageClient(session, playground.url)
        state = await client.state(user)
        card = card_with(state, action_id, text)
        assert card is not None
        return await client.post(
            "/api/actions",
            {
                "user": user,
                "channel": card["channel"],
                "message_ts": card["ts"],
                "action": {"action_id": action_id, "type": "button", "value": "approve"},
            },
        )


@pytest.mark.browser
async def test_the_page_cannot_be_made_to_act_as_the_bot(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground.url + "?as=U0HANDBACK")
    await expect(page.locator("#as")).to_have_value("U0ALICE")
    await say(page, "status")
    await expect(page.locator("#thread")).to_contain_text("Here is what runs where")
    assert await page.locator("#toast").is_hidden()


@pytest.mark.parametrize(
    "body", [b"{not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000], ids=range(3)
)
async def test_the_web_api_answers_a_broken_body_as_slack_does(
    playground: Playground, body: bytes
) -> None:
    slack = playground.slack
    assert slack is not None
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{slack.api_url}chat.postMessage",
            data=body,
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {slack.bot_token}",
            },
        ) as response,
    ):
        assert response.status == 200
        assert await response.json() == {"ok": False, "error": "invalid_json"}
