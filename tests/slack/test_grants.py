"""Standing grants end to end over real HTTP: "Approve for this thread" approves the call and
lets later calls of the tool there run without a card, until the grant expires or is revoked;
every use is audited, and a grant never approves for someone who shaped the turn."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_GRANT, ACTION_REVOKE
from bot.slack import SlackBot, load_settings
from state import Grant, RedisStore, StoreError, open_store

from .._local_slack import Message, TestSlack
from ..cli.test_cli_views import handback

# Grant records corrupted behind the store's back.
from ..state.conftest import overwrite_raw
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Clock, Harness

THREAD_GRANT = f"{ACTION_GRANT}:thread"
CHANNEL_GRANT = f"{ACTION_GRANT}:channel"
DEV_DEPLOY = {"service": "api", "environment": "dev"}


def _buttons(card: Message) -> dict[str, str]:
    """The card's buttons: action id -> label."""
    return {
        element["action_id"]: element["text"]["text"]
        for block in card.blocks
        if block["type"] == "actions"
        for element in block["elements"]
        if element["type"] == "button"
    }


async def _granted_thread(h: Harness, *, by: str = BOB) -> tuple[str, Grant]:
    """Alice asks for a deploy; `by` approves it for the rest of the thread."""
    asked = await h.mention(ALICE, "deploy api to dev")
    card = h.card(asked.ts)
    assert await h.click(by, card.ts, THREAD_GRANT) == 200
    assert agents.DEPLOYS == [DEV_DEPLOY]
    [grant] = await h.store.active_grants(now=h.clock())
    return asked.ts, grant


async def test_the_card_offers_the_rule_s_grants_next_to_approve(make_bot: BotFactory) -> None:
    async with make_bot(agents.grant_agent) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        buttons = _buttons(h.card(asked.ts))
        assert list(buttons)[:3] == [ACTION_APPROVE, THREAD_GRANT, CHANNEL_GRANT]
        assert buttons[THREAD_GRANT] == "Approve for this thread, for the requester (1 h)"
        assert buttons[CHANNEL_GRANT] == "Approve for this channel, for the requester (1 h)"
        # The line under the buttons says what a grant covers, in words, with the requester.
        terms = str(h.card(asked.ts).blocks)
        assert "later `deploy` calls of this same tool in this thread or this channel" in terms
        assert f"requested by <@{ALICE}>" in terms
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        assert not any(a.startswith(ACTION_GRANT) for a in _buttons(h.card(asked.ts)))


async def test_a_thread_grant_runs_the_next_deploys_there_without_a_card(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0BOB,U0CAROL") as h:
        thread, grant = await _granted_thread(h)
        assert (grant.tool, grant.scope, grant.thread_ts, grant.granted_by) == (
            "deploy",
            "thread",
            thread,
            BOB,
        )
        assert grant.expires_at == pytest.approx(h.clock() + 3600, abs=5)
        [card] = h.cards(thread)
        shown = str(card.blocks)
        assert "Approved" in shown and "for the rest of this thread until" in shown
        assert not any(a.startswith("hb:") for a in _buttons(card))

        for n in (2, 3):
            await h.reply(ALICE, thread, "deploy again")
            assert len(agents.DEPLOYS) == n
            assert len(h.cards(thread)) == 1  # no new card
            assert h.texts(thread)[-1] == "Tool said: deployed api to dev"
        notices = [t for t in h.texts(thread) if "standing grant" in t]
        assert len(notices) == 2
        assert f"<@{BOB}>'s standing grant for this thread" in notices[0]
        assert "`deploy` runs without a card" in notices[0]
        assert f"<!date^{int(grant.expires_at)}^" in notices[0]

        # Another thread of the same channel is not covered: a card, and nothing runs.
        other = await h.mention(ALICE, "deploy api to dev")
        assert ACTION_APPROVE in _buttons(h.card(other.ts))
        assert len(agents.DEPLOYS) == 3

        audit = await h.store.recent_audit()
        uses = [e for e in audit if e.action == "answered" and grant.grant_id in e.detail]
        assert len(uses) == 2 and all(e.user == BOB for e in uses)
        granted = [e for e in audit if e.action == "granted"]
        assert len(granted) == 1 and granted[0].user == BOB
        listed = await asyncio.to_thread(handback, "audit", "--store", store_url, "--limit", "100")
        assert listed.returncode == 0, listed.stderr
        printed = listed.stdout
        assert printed.count(f"under standing grant {grant.grant_id}") == 2
        assert printed.count(f"standing grant {grant.grant_id}: `deploy`") == 1


async def test_a_channel_grant_covers_every_thread_of_the_channel(make_bot: BotFactory) -> None:
    async with make_bot(agents.grant_agent) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, CHANNEL_GRANT)
        other = await h.mention(ALICE, "deploy api to dev")
        assert h.cards(other.ts) == []
        assert agents.DEPLOYS == [DEV_DEPLOY] * 2
        assert "for this channel" in h.texts(other.ts)[-2]
        elsewhere = await h.mention(ALICE, "deploy api to dev", channel="C0DEPLOYS")
        assert h.cards(elsewhere.ts) and len(agents.DEPLOYS) == 2
        # Only the requests of whoever asked for the approval it was given on: carol's is not.
        carols = await h.mention(CAROL, "deploy api to dev")
        assert ACTION_APPROVE in _buttons(h.card(carols.ts)) and len(agents.DEPLOYS) == 2


async def test_after_the_grant_expires_a_card_is_back(make_bot: BotFactory) -> None:
    async with make_bot(agents.grant_agent) as h:
        thread, grant = await _granted_thread(h)
        h.clock.now = grant.expires_at + 1
        await h.reply(ALICE, thread, "deploy again")
        assert len(h.cards(thread)) == 2
        assert agents.DEPLOYS == [DEV_DEPLOY]
        assert await h.store.active_grants(now=h.clock()) == []


async def test_after_a_revoke_a_card_is_back(make_bot: BotFactory, store_url: str) -> None:
    async with make_bot(agents.grant_agent) as h:
        thread, grant = await _granted_thread(h)
        # `handback grants revoke`: the revoke an operator makes (the Revoke button's is below).
        revoke = ("grants", "revoke", grant.grant_id, "--by", DAVE, "--store", store_url)
        done = await asyncio.to_thread(handback, *revoke)
        assert done.returncode == 0, done.stderr
        assert f"Revoked grant {grant.grant_id}" in done.stdout
        revoked = await h.store.get_grant(grant.grant_id)
        assert revoked is not None and revoked.revoked_by == DAVE
        again = await asyncio.to_thread(handback, *revoke)
        assert again.returncode == 1 and f"already revoked by {DAVE}" in again.stdout
        await h.reply(ALICE, thread, "deploy again")
        assert len(h.cards(thread)) == 2
        assert agents.DEPLOYS == [DEV_DEPLOY]
        revokes = [e for e in await h.store.recent_audit() if e.action == "revoked"]
        assert [(e.user, grant.grant_id in e.detail) for e in revokes] == [(DAVE, True)]


async def test_a_grant_is_not_used_for_a_turn_its_giver_shaped(make_bot: BotFactory) -> None:
    async with make_bot(agents.grant_agent) as h:
        thread, _ = await _granted_thread(h)
        # Bob asks himself: his own grant must not approve his own request.
        await h.reply(BOB, thread, "deploy again")
        assert len(h.cards(thread)) == 2
        assert agents.DEPLOYS == [DEV_DEPLOY]
        # Carol, another approver, can approve it on the card.
        await h.click(CAROL, h.card(thread).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [DEV_DEPLOY] * 2


async def test_a_grant_by_someone_no_longer_an_approver_is_not_used(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0BOB") as h:
        thread, grant = await _granted_thread(h)
    # The same store, now with Bob off the list: his grant approves nothing.
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0CAROL") as h:
        h.clock.now = grant.created_at + 60
        await h.reply(ALICE, thread, "deploy again")
        assert len(h.cards(thread)) == 2
        assert agents.DEPLOYS == [DEV_DEPLOY]


async def test_an_unreadable_grant_approves_nothing(make_bot: BotFactory, store_url: str) -> None:
    async with make_bot(agents.grant_agent) as h:
        thread, grant = await _granted_thread(h)
        unreadable = "{not json" if isinstance(h.store, RedisStore) else "[]"
        await overwrite_raw(h.store, store_url, "grants", grant.grant_id, unreadable)
        await h.reply(ALICE, thread, "deploy again")
        assert len(h.cards(thread)) == 2
        assert agents.DEPLOYS == [DEV_DEPLOY]


async def test_a_forged_grant_click_is_refused_and_audited(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        # The rule offers no grant; a click that claims one (a button the card does not have)
        # is refused, ephemeral and audited, and grants nothing.
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        payload["actions"][0]["action_id"] = THREAD_GRANT
        payload["actions"][0]["value"] = "thread"
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert response.status == 200
        assert "no such standing grant" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []
        assert await h.store.active_grants(now=h.clock()) == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert refused and "no such standing grant" in refused[0].detail


class _CrashingStore:
    """A store whose `name` call fails once (as if the process died just there: the work item
    is taken again), or with `lose` does nothing once (as if the process died just before)."""

    def __init__(self, store: Any, name: str, *, lose: bool = False) -> None:
        self._store = store
        self._name = name
        self._lose = lose
        self.hit = 0

    def _aimed_at(self, args: tuple[Any, ...]) -> bool:
        # The inbox takes every event and click too: only the resume queued for a run counts.
        return self._name != "enqueue" or (bool(args) and args[0] == "recover")

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._store, name)
        if name != self._name:
            return real

        async def once(*args: Any, **kwargs: Any) -> Any:
            if not self._aimed_at(args):
                return await real(*args, **kwargs)
            self.hit += 1
            if self.hit == 1:
                if self._lose:
                    return None
                raise StoreError("Redis at `test` failed: Connection reset by peer.")
            return await real(*args, **kwargs)

        return once


@asynccontextmanager
async def _crashing_bot(
    slack: TestSlack, store_url: str, name: str, *, lose: bool = False
) -> AsyncIterator[tuple[Harness, _CrashingStore]]:
    async with open_store(store_url) as real:
        store = _CrashingStore(real, name, lose=lose)
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=store_url,
            handback_approvers="anyone",
            handback_liveness_ttl=0.5,
        )
        clock = Clock()
        bot = SlackBot(
            agent=agents.grant_agent,
            store=store,  # type: ignore[arg-type]
            settings=settings,
            clock=clock,
            loops=False,
        )
        async with bot, bot.serve_http("127.0.0.1", 0) as url:
            slack.bot_url = url
            yield Harness(slack=slack, bot=bot, store=real, clock=clock), store


async def _drain_until(h: Harness, done: Any, seconds: float = 10) -> None:
    """Drain until `done()`: a work item whose attempt failed is taken again after its lease."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        await h.bot.drain()


async def test_a_grant_lost_with_its_process_is_added_by_the_retried_click(
    slack: TestSlack, store_url: str
) -> None:
    async with _crashing_bot(slack, store_url, "add_grant") as (h, store):
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.slack.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        await _drain_until(h, lambda: bool(agents.DEPLOYS) and store.hit >= 2)
        assert store.hit == 2  # failed once, then added by the retry
        assert agents.DEPLOYS == [DEV_DEPLOY]
        [grant] = await h.store.active_grants(now=h.clock())
        assert grant.granted_by == BOB
        await h.reply(ALICE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 2 and len(h.cards(asked.ts)) == 1
        granted = [e for e in await h.store.recent_audit() if e.action == "granted"]
        assert len(granted) == 1


async def test_a_turn_retried_after_a_use_runs_the_tool_once(
    slack: TestSlack, store_url: str
) -> None:
    """The turn's process dies after the grant answered the approval, before the resume was
    queued: the retried turn posts no card and no second notice, and the deploy runs once."""
    async with _crashing_bot(slack, store_url, "enqueue") as (h, store):
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, CHANNEL_GRANT)
        # A new conversation in the channel, so the retried turn starts it afresh.
        again = await h.slack.post_user_message(ALICE, "C0GENERAL", "deploy api to dev")
        await _drain_until(h, lambda: len(agents.DEPLOYS) == 2)
        assert store.hit >= 2
        assert agents.DEPLOYS == [DEV_DEPLOY] * 2
        assert h.cards(again.ts) == []
        assert len([t for t in h.texts(again.ts) if "standing grant" in t]) == 1
        assert h.texts(again.ts)[-1] == "Tool said: deployed api to dev"


async def test_a_use_whose_resume_was_lost_is_recovered(slack: TestSlack, store_url: str) -> None:
    """The resume of a call approved under a grant is never queued (the process died right
    after the answer): the settled-run recovery finds the run and resumes it."""
    async with _crashing_bot(slack, store_url, "enqueue", lose=True) as (h, store):
        asked = await h.mention(ALICE, "deploy api to dev")
        assert store.hit == 0
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        await h.reply(ALICE, asked.ts, "deploy again")
        assert store.hit == 1 and len(agents.DEPLOYS) == 1  # answered, not resumed
        assert await h.bot.answers.recover() == 1
        await h.bot.drain()
        assert agents.DEPLOYS == [DEV_DEPLOY] * 2
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to dev"


async def test_a_follow_up_turn_retried_after_a_use_runs_the_tool_once(
    slack: TestSlack, store_url: str
) -> None:
    """As above, in the thread of the grant: the retried turn continues the conversation from
    the same parent run as its first attempt, finds the approval answered, and runs it once."""
    async with _crashing_bot(slack, store_url, "enqueue") as (h, store):
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        await h.slack.post_user_message(ALICE, "C0GENERAL", "deploy again", thread_ts=asked.ts)
        await _drain_until(h, lambda: len(agents.DEPLOYS) == 2)
        assert store.hit >= 2
        assert agents.DEPLOYS == [DEV_DEPLOY] * 2
        assert len(h.cards(asked.ts)) == 1
        assert len([t for t in h.texts(asked.ts) if "standing grant" in t]) == 1
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to dev"
        assert not [t for t in h.texts(asked.ts) if "went wrong" in t]


async def test_the_giver_lists_and_revokes_a_grant_from_app_home(make_bot: BotFactory) -> None:
    """bob's Home lists the grant he gave, with Revoke; alice cannot revoke it (a forged click
    is refused and audited); bob's Revoke ends it (audited, the thread told), his view no longer
    lists it, and the next deploy in the thread asks again."""
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0BOB,U0CAROL") as h:
        thread, grant = await _granted_thread(h)
        assert (await h.slack.open_home(BOB)).status == 200
        await h.bot.drain()
        view = h.slack.home_view(BOB)
        assert view is not None and "Standing grants you gave" in str(view)
        revoke_block = f"hb|{grant.grant_id}|revoke"
        assert revoke_block in str(view)

        # Someone else's Revoke, forged with the grant's id, is refused and changes nothing.
        assert (await h.slack.open_home(ALICE)).status == 200
        await h.bot.drain()
        h.slack.home_views[ALICE] = view  # alice's client sends bob's button
        forged = await h.slack.click_home(
            ALICE, ACTION_REVOKE, value=grant.grant_id, block_id=revoke_block
        )
        assert forged.status == 200
        await h.bot.drain()
        assert [g.grant_id for g in await h.store.active_grants(now=h.clock())] == [grant.grant_id]
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert refused and refused[0].user == ALICE and "not one you gave" in refused[0].detail

        clicked = await h.slack.click_home(
            BOB, ACTION_REVOKE, value=grant.grant_id, block_id=revoke_block
        )
        assert clicked.status == 200
        await h.bot.drain()
        assert await h.store.active_grants(now=h.clock()) == []
        revoked = [e for e in await h.store.recent_audit() if e.action == "revoked"]
        assert [e.user for e in revoked] == [BOB]
        assert (
            f"<@{BOB}> revoked the standing grant for `deploy` in this thread"
            in h.texts(thread)[-1]
        )
        after = h.slack.home_view(BOB)
        assert after is not None and revoke_block not in str(after)
        assert "Revoked your grant for `deploy`" in str(after)

        await h.reply(ALICE, thread, "deploy again")
        assert len(agents.DEPLOYS) == 1
        assert ACTION_APPROVE in _buttons(h.cards(thread)[-1])
