"""The HTTP edges: Slack's request signatures, the health check, and Web API rate limits and
failures (a card post or update that fails is retried, or told in the thread)."""

from __future__ import annotations

import gc
import json
import time

import aiohttp
import pytest

from blocks import ACTION_APPROVE, ACTION_CONFIRM

# The freeze `handback run` does (not exported: the CLI is its one caller).
from bot.slack import _heap

from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, BotFactory, Harness


async def _nothing_happened(h: Harness, *, calls_before: int) -> None:
    await h.bot.drain()
    assert h.slack.bot_messages() == []
    assert len(h.slack.calls) == calls_before


def _mention_body(h: Harness) -> str:
    event = {
        "type": "app_mention",
        "user": ALICE,
        "text": f"<@{h.slack.bot_user_id}> hi",
        "ts": "1700000000.000100",
        "channel": CHANNEL,
    }
    return json.dumps(h.slack.event_envelope(event))


@pytest.mark.parametrize(
    "tamper",
    [
        {"sign": False},
        {"timestamp": int(time.time()) - 301},
        {"signature": "v0=" + "0" * 64},
    ],
    ids=["unsigned", "older-than-five-minutes", "forged-signature"],
)
async def test_bad_signatures_get_401_and_change_nothing(
    make_bot: BotFactory, tamper: dict[str, object]
) -> None:
    async with make_bot(agents.memory_agent) as h:
        calls = len(h.slack.calls)
        response = await h.slack.send_raw(_mention_body(h), **tamper)  # type: ignore[arg-type]
        assert response.status == 401
        await _nothing_happened(h, calls_before=calls)


async def test_unsigned_click_gets_401_and_changes_nothing(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart")
        card = h.card(asked.ts)
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_CONFIRM)
        from urllib.parse import urlencode

        body = urlencode({"payload": json.dumps(payload)})
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        old = int(time.time()) - 600
        assert (await h.slack.send_raw(body, headers=headers, sign=False)).status == 401
        assert (await h.slack.send_raw(body, headers=headers, timestamp=old)).status == 401
        await h.bot.drain()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert h.texts(asked.ts) == []


async def test_healthz(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        url = h.slack.bot_url
        assert url is not None
        async with (
            aiohttp.ClientSession() as session,
            session.get(url.replace("/slack/events", "/healthz")) as response,
        ):
            assert response.status == 200
            assert (await response.json())["ok"] is True


async def test_rate_limited_post_is_retried(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        h.slack.fail_next("chat.postMessage", status=429, retry_after=0)
        asked = await h.mention(ALICE, "hello")
        assert h.texts(asked.ts) == ["I have heard: hello"]
        posts = [c.status for c in h.slack.calls if c.method == "chat.postMessage"]
        assert posts == [429, 200]


async def test_url_verification_challenge(make_bot: BotFactory) -> None:
    async with make_bot(agents.memory_agent) as h:
        body = json.dumps({"token": "t", "challenge": "c-123", "type": "url_verification"})
        response = await h.slack.send_raw(body)
        assert response.status == 200
        assert "c-123" in response.body


async def test_the_heap_freeze_of_handback_run_keeps_startup_objects_out_of_full_collections(
    make_bot: BotFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection walking every module's objects would hold up every ack in flight; a
    process that is all ours (`handback run`: `serve(freeze_heap=True)`) freezes them once the
    app serves (the count is of objects, well over the app's own). An embedding program's
    collector is left alone (`tests/slack/test_embedding.py`)."""
    async with make_bot(agents.memory_agent):
        monkeypatch.setattr(_heap, "_frozen", False)  # once per process: as in a fresh one
        before = gc.get_freeze_count()
        _heap.freeze_startup_heap()
        try:
            assert gc.get_freeze_count() - before > 10_000
        finally:
            gc.unfreeze()


@pytest.mark.usefixtures("nothing_leaks")
async def test_card_post_failing_once_is_retried(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        h.slack.fail_next("chat.postMessage", status=500)
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_card_post_failing_tells_the_thread_and_keeps_the_run(make_bot: BotFactory) -> None:
    async with make_bot(agents.recall_agent) as h:
        for _ in range(2):  # the post and its retry
            h.slack.fail_next("chat.postMessage", status=500)
        asked = await h.mention(ALICE, "deploy api")
        assert h.cards(asked.ts) == []
        [notice] = h.texts(asked.ts)
        assert "could not show" in notice.lower()
        records = await h.store.due_interactions(h.clock() + 10**9)
        [record] = [r for r in records if r.thread_ts == asked.ts]
        assert record.status == "pending" and record.message_ts is None
        # The conversation goes on: the next message in the thread moves past the lost card.
        await h.reply(BOB, asked.ts, "deploy again")
        assert len(h.cards(asked.ts)) == 1
        closed = await h.store.get_interaction(record.interaction_id)
        assert closed is not None and closed.status == "superseded"


@pytest.mark.usefixtures("nothing_leaks")
async def test_card_update_failing_after_the_claim_still_resumes(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy")
        card = h.card(asked.ts)
        for _ in range(2):
            h.slack.fail_next("chat.update", status=500)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts) == ["Tool said: deployed api to prod"]


@pytest.mark.usefixtures("nothing_leaks")
async def test_paging_while_someone_answers_leaves_the_answered_card(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.huge_select_agent) as h:
        asked = await h.mention(ALICE, "pick a host")
        card = h.card(asked.ts)
        # Bob's page update fails once, so it lands (on the retry) after Carol's answer.
        h.slack.fail_next("chat.update", status=500)
        await h.slack.click(BOB, card.ts, "hb:more:1")
        await h.slack.wait_for(lambda: [c for c in h.slack.calls if c.method == "chat.update"])
        await h.slack.click(CAROL, card.ts, "hb:select", selected="host-003")
        await h.bot.drain()
        assert h.texts(asked.ts) == ["Tool said: host-003"]
        final = h.slack.message(card.channel, card.ts)
        assert final is not None
        shown = json.dumps(final.blocks)
        assert f"<@{CAROL}>" in shown
        assert "hb:select" not in shown and "hb:more" not in shown
