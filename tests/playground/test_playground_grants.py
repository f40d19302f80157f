"""The playground's demo agent gives and uses standing grants: a staging deploy's card offers
"Approve for this thread (1 h)", and the next deploy in that thread runs without a card, the
thread saying under whose grant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from bot import chatops
from bot.playground import Playground

from .conftest import PageClient, bot_replies, element


@pytest.fixture
async def page(playground: Playground) -> AsyncIterator[PageClient]:
    async with aiohttp.ClientSession() as session:
        yield PageClient(session, playground.url)


async def _say(
    page: PageClient, text: str, thread_ts: str | None = None, *, user: str = "U0ALICE"
) -> str:
    body: dict[str, Any] = {"user": user, "channel": "C0DEPLOYS", "text": text}
    if thread_ts is not None:
        body["thread_ts"] = thread_ts
    status, answer = await page.post("/api/messages", body)
    assert status == 200, answer
    return str(answer["ts"])


async def test_a_thread_grant_in_the_playground(page: PageClient) -> None:
    ts = await _say(page, "deploy web 2.1 to staging")
    card = await page.wait_for("U0BOB", lambda s: next(iter(bot_replies(s, "hb:grant")), None))
    button = element(card, "hb:grant:thread")
    assert button is not None
    assert button["text"]["text"] == "Approve for this thread, for the requester (1 h)"
    assert "requested by <@U0ALICE>" in str(card["blocks"])
    status, _ = await page.post(
        "/api/actions",
        {
            "user": "U0BOB",
            "channel": "C0DEPLOYS",
            "message_ts": card["ts"],
            "action": {"action_id": "hb:grant:thread", "type": "button", "value": "thread"},
        },
    )
    assert status == 200
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed web 2.1 to staging"))

    await _say(page, "deploy web 2.2 to staging", thread_ts=ts)
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed web 2.2 to staging"))
    state = await page.state("U0ALICE")
    [notice] = bot_replies(state, "standing grant for this thread")
    assert "<@U0BOB>" in notice["text"] and notice["thread_ts"] == ts
    # No card asked again: the one card there was is the answered first one.
    assert bot_replies(state, "hb:approve") == []
    assert len(bot_replies(state, "for the rest of this thread until")) == 1
    assert chatops.fleet.versions[("web", "staging")] == "2.2"


async def test_a_thread_grant_does_not_cover_another_persona_s_request(page: PageClient) -> None:
    """bob's grant on alice's staging deploy; dave (no approver) asks for another deploy in
    that thread: a card asks for it, and nothing runs or says it runs."""
    ts = await _say(page, "deploy web 2.3 to staging")
    card = await page.wait_for("U0BOB", lambda s: next(iter(bot_replies(s, "hb:grant")), None))
    status, _ = await page.post(
        "/api/actions",
        {
            "user": "U0BOB",
            "channel": "C0DEPLOYS",
            "message_ts": card["ts"],
            "action": {"action_id": "hb:grant:thread", "type": "button", "value": "thread"},
        },
    )
    assert status == 200
    await page.wait_for("U0ALICE", lambda s: bot_replies(s, "Deployed web 2.3 to staging"))

    await _say(page, "deploy api 9.9 to staging", thread_ts=ts, user="U0DAVE")
    asked = await page.wait_for(
        "U0BOB",
        lambda s: [m for m in bot_replies(s, "hb:approve") if m.get("thread_ts") == ts],
    )
    assert len(asked) == 1
    state = await page.state("U0DAVE")
    assert bot_replies(state, "runs without a card") == []
    assert chatops.fleet.versions.get(("api", "staging")) != "9.9"
