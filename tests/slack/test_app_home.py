"""App Home over real HTTP, on both stores: the inbox of what waits on a person, answered
through the card's own claim, refreshed when something new waits on them."""

from __future__ import annotations

import asyncio
from typing import Any

from blocks import ACTION_APPROVE, ACTION_DENY_REASON
from bot.slack import SlackBot, load_settings
from state import InteractionRecord, RunRecord, open_store

from .._local_slack import TestSlack, home_block_actions
from ..blocks._slack import check_home_view
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Clock, Harness, calls_to
from .test_durable_store_errors import run_sql

NOT_IN_HOME = (
    "This request is not one you can answer from App Home; answer it on its card in the thread."
)
"""The exact refusal shown in the Home tab and recorded in the audit, word for word."""

NOTICE_BLOCK = "hb-notice"
"""The block id of the notice on top of a Home view (a new notice replaces the last one)."""


def _listed(view: dict[str, Any] | None) -> set[str]:
    """The interaction ids whose controls a Home view shows."""
    assert view is not None, "no Home view was published"
    return {
        str(block["block_id"]).split("|")[1]
        for block in view["blocks"]
        if block["type"] == "actions"
    }


async def _open(h: Harness, user: str) -> dict[str, Any]:
    response = await h.slack.open_home(user)
    assert response.status == 200
    await h.bot.drain()
    view = h.slack.home_view(user)
    assert view is not None
    check_home_view(view)
    return view


async def _ask(h: Harness, user: str, text: str = "deploy api to prod") -> tuple[str, str]:
    """(thread ts, interaction id) of the card the request posts."""
    asked = await h.mention(user, text)
    return asked.ts, h.interaction_id(h.card(asked.ts))


async def test_an_approver_sees_exactly_the_requests_they_may_answer(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _, alices = await _ask(h, ALICE)
        _, bobs = await _ask(h, BOB)

        assert _listed(await _open(h, CAROL)) == {alices, bobs}
        assert _listed(await _open(h, BOB)) == {alices}  # not his own
        assert _listed(await _open(h, ALICE)) == set()  # not an approver
        assert _listed(await _open(h, DAVE)) == set()
        assert "Nothing waits on you now." in str(h.slack.home_view(DAVE))


async def test_a_question_open_to_anyone_in_the_channel_is_listed_only_for_who_asked(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.select_agent) as h:
        asked, question = await _ask(h, ALICE, "pick an environment")
        assert _listed(await _open(h, ALICE)) == {question}
        assert _listed(await _open(h, BOB)) == set()

        await h.slack.click_home(ALICE, "hb:option:2")  # prod
        await h.bot.drain()

        assert h.texts(asked)[-1] == "Tool said: prod"
        card = h.slack.message(h.card(asked).channel, h.card(asked).ts)
        assert card is not None and card.edited and "hb:option" not in str(card.blocks)
        assert _listed(h.slack.home_view(ALICE)) == set()


async def test_approving_from_home_resumes_updates_the_card_and_refreshes_home(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked, interaction = await _ask(h, ALICE)
        assert _listed(await _open(h, BOB)) == {interaction}

        response = await h.slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction)
        assert response.status == 200
        await h.bot.drain()

        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked)[-1] == "Tool said: deployed api to prod"
        card = h.card(asked)
        assert "Approved" in str(card.blocks) and f"<@{BOB}>" in str(card.blocks)
        view = h.slack.home_view(BOB)
        check_home_view(view or {})
        assert _listed(view) == set()
        decided = str(view)
        assert "Recently decided" in decided
        assert (
            f"Approved `deploy` `service=api environment=prod`, asked by <@{ALICE}>, by you"
            in decided
        )
        answered = [e for e in await h.store.recent_audit() if e.action == "answered"]
        assert [(e.user, e.interaction_id) for e in answered] == [(BOB, interaction)]


async def test_home_and_card_clicked_at_the_same_moment_resume_once(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked, interaction = await _ask(h, ALICE)
        await _open(h, BOB)
        await _open(h, CAROL)
        card = h.card(asked)

        clicks = []
        for _ in range(5):
            clicks += [
                h.slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction),
                h.slack.click(CAROL, card.ts, ACTION_APPROVE),
                h.slack.click_home(CAROL, ACTION_APPROVE, interaction_id=interaction),
            ]
        statuses = await asyncio.gather(*clicks)
        await h.bot.drain()

        assert [s.status for s in statuses] == [200] * 15
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked) == ["Tool said: deployed api to prod"]
        audit = await h.store.recent_audit(limit=100)
        assert sum(e.action == "answered" for e in audit) == 1
        assert sum(e.action == "refused" for e in audit) == 14
        stored = await h.store.get_interaction(interaction)
        assert stored is not None and stored.answered_by in {BOB, CAROL}


async def test_a_refusal_in_home_is_shown_there_and_audited(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked, interaction = await _ask(h, ALICE)
        await _open(h, BOB)
        stale = h.slack.home_view(BOB)
        await h.click(CAROL, h.card(asked).ts, ACTION_APPROVE)
        # Bob clicks the view he had before Carol's answer reached it.
        h.slack.home_views[BOB] = stale or {}

        await h.slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction)
        await h.bot.drain()

        assert len(agents.DEPLOYS) == 1
        view = h.slack.home_view(BOB)
        check_home_view(view or {})
        assert f"This was already answered by <@{CAROL}>." in str(view)
        assert _listed(view) == set()
        assert h.ephemerals(BOB) == []  # Home has no channel to be ephemeral in
        [refused] = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert (refused.user, refused.interaction_id) == (BOB, interaction)


def _forged_home_click(h: Harness, seen_by: str, clicker: str, action_id: str) -> dict[str, Any]:
    """A click on `seen_by`'s Home view sent as `clicker`'s: Slack would never send it (their
    own view has no such control), and the bot must refuse it all the same."""
    forged = home_block_actions(h.slack, seen_by, action_id, value=None, selected=None)
    forged["user"] = {"id": clicker, "team_id": h.slack.team_id}
    return forged


async def test_a_home_click_by_someone_the_policy_refuses_is_refused(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _, interaction = await _ask(h, ALICE)
        await _open(h, BOB)
        await _open(h, DAVE)

        await h.slack.send_interactivity(_forged_home_click(h, BOB, DAVE, ACTION_APPROVE))
        await h.bot.drain()

        assert agents.DEPLOYS == []
        stored = await h.store.get_interaction(interaction)
        assert stored is not None and stored.status == "pending"
        [refused] = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert (refused.user, refused.interaction_id) == (DAVE, interaction)
        assert "not on the list" in refused.detail
        assert refused.detail in str(h.slack.home_view(DAVE))


async def test_a_home_click_on_a_question_only_the_channel_may_answer_is_refused(
    make_bot: BotFactory,
) -> None:
    # Anyone in the channel may answer this question on its card, but Home has no channel:
    # Bob, who is not the asker and on no list, may not answer it from there.
    async with make_bot(agents.confirm_agent) as h:
        asked, interaction = await _ask(h, ALICE, "restart")
        await _open(h, ALICE)
        await _open(h, BOB)

        await h.slack.send_interactivity(_forged_home_click(h, ALICE, BOB, "hb:confirm"))
        await h.bot.drain()

        assert h.texts(asked) == []
        stored = await h.store.get_interaction(interaction)
        assert stored is not None and stored.status == "pending"
        [refused] = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert (refused.user, refused.detail) == (BOB, NOT_IN_HOME)
        assert NOT_IN_HOME in str(h.slack.home_view(BOB))


async def test_a_message_click_without_a_channel_is_still_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked, _ = await _ask(h, ALICE)
        payload = h.slack.block_actions_payload(BOB, h.card(asked).ts, ACTION_APPROVE)
        payload.pop("channel")
        payload["container"].pop("channel_id")
        await h.slack.send_interactivity(payload)
        await h.bot.drain()

        assert agents.DEPLOYS == []
        [refused] = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert refused.user == BOB and "does not belong" in refused.detail


async def test_new_requests_refresh_only_the_views_of_people_who_opened_home(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        assert _listed(await _open(h, BOB)) == set()
        await _open(h, DAVE)  # opened Home, but may not approve: not refreshed
        before = len(calls_to(h.slack, "views.publish"))

        _, interaction = await _ask(h, ALICE)

        published = calls_to(h.slack, "views.publish")[before:]
        assert [call.args["user_id"] for call in published] == [BOB]
        assert _listed(h.slack.home_view(BOB)) == {interaction}
        assert h.slack.home_view(CAROL) is None  # never opened Home: no Slack call for her


async def test_deny_with_reason_from_home_opens_the_form(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked, interaction = await _ask(h, ALICE)
        await _open(h, BOB)
        await h.slack.click_home(BOB, ACTION_DENY_REASON, interaction_id=interaction)
        await h.bot.drain()
        [view] = list(h.slack.views.values())
        [reason] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        await h.slack.submit_view(BOB, view.id, {reason: "change freeze"})
        await h.bot.drain()

        assert agents.DEPLOYS == []
        assert "change freeze" in h.texts(asked)[-1]


async def test_other_tabs_publish_nothing(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent) as h:
        event = {"type": "app_home_opened", "user": BOB, "tab": "messages", "channel": "D0BOB"}
        assert (await h.slack.send_event(event)).status == 200
        await h.bot.drain()
        assert calls_to(h.slack, "views.publish") == []
        assert await h.store.home_viewers() == []


async def test_an_expired_request_leaves_the_views_it_was_in(make_bot: BotFactory) -> None:
    async with make_bot(
        agents.approval_agent, HANDBACK_APPROVERS="S0OPS", HANDBACK_INTERACTION_TTL=60
    ) as h:
        _, interaction = await _ask(h, ALICE)
        assert _listed(await _open(h, BOB)) == {interaction}
        assert await h.store.home_viewers() == [BOB]

        h.clock.advance(61)
        assert await h.bot.sweeper.run_until_idle() == 1
        await h.bot.drain()

        assert _listed(h.slack.home_view(BOB)) == set()
        assert agents.DEPLOYS == []


async def test_an_app_home_opened_that_does_not_fit_is_acked_and_ignored(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent) as h:
        event = {"type": "app_home_opened", "user": 42, "tab": "home"}
        assert (await h.slack.send_event(event)).status == 200
        await h.bot.drain()
        assert calls_to(h.slack, "views.publish") == []
        assert await h.store.home_viewers() == []


async def test_another_agents_requests_in_a_shared_store_are_not_listed(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _, ours = await _ask(h, ALICE)
        await h.store.save_run(
            RunRecord(run_id="theirs", parent_id=None, agent_name="another", status="paused")
        )
        theirs = InteractionRecord(
            interaction_id="their-approval",
            run_id="theirs",
            kind="approval",
            payload={"tool": "deploy", "arguments": {}},
            channel="C0GENERAL",
            thread_ts="1700000000.000100",
            message_ts="1700000000.000200",
            requester=ALICE,
            created_at=h.clock.now,
            expires_at=h.clock.now + 600,  # sooner than ours: listed first, were it listed
        )
        await h.store.add_interactions([theirs])

        assert _listed(await _open(h, BOB)) == {ours}


async def test_a_home_click_that_cannot_be_recorded_says_so_on_top_of_the_view(
    slack: TestSlack, sqlite_store_url: str
) -> None:
    """A Home click has no channel for an ephemeral "not recorded": the view the person has
    open is published again from the click's payload (the store is what failed) with the
    notice on top, once however often it happens, and nothing is approved."""
    config = load_settings(
        slack_bot_token=slack.bot_token,
        slack_signing_secret=slack.signing_secret,
        slack_api_url=slack.api_url,
        handback_store=sqlite_store_url,
        handback_approvers="S0OPS",
    )
    async with (
        open_store(sqlite_store_url) as store,
        SlackBot(agent=agents.approval_agent, store=store, settings=config, loops=False) as bot,
        bot.serve_http("127.0.0.1", 0) as url,
    ):
        slack.bot_url = url
        h = Harness(slack=slack, bot=bot, store=store, clock=Clock())
        asked, interaction = await _ask(h, ALICE)
        before = await _open(h, BOB)
        run_sql(
            sqlite_store_url,
            "CREATE TRIGGER refuse BEFORE INSERT ON inbox"
            " BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END",
        )
        for _ in range(2):
            published = len(calls_to(slack, "views.publish"))
            response = await slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction)
            assert response.status == 200
            # The notice is published by a task after the ack.
            await slack.wait_for(lambda p=published: len(calls_to(slack, "views.publish")) > p)
            await bot.drain()
        view = slack.home_view(BOB)
        assert view is not None
        check_home_view(view)
        notices = [b for b in view["blocks"] if b.get("block_id") == NOTICE_BLOCK]
        assert len(notices) == 1 and view["blocks"][0] is notices[0]
        assert "could not record" in str(notices[0])
        assert _listed(view) == _listed(before) == {interaction}  # the rest as it was
        assert agents.DEPLOYS == []
        assert (await store.get_interaction(interaction)).status == "pending"  # type: ignore[union-attr]
        assert not [m for m in h.texts(asked) if m.startswith("Tool said")]


async def test_a_vote_cast_leaves_waiting_on_you_and_is_listed_as_one_of_two(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.two_person_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _, interaction = await _ask(h, ALICE)
        assert _listed(await _open(h, BOB)) == {interaction}
        assert _listed(await _open(h, CAROL)) == {interaction}

        await h.slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction)
        await h.bot.drain()

        assert agents.DEPLOYS == []  # one of two
        bobs = await _open(h, BOB)
        assert _listed(bobs) == set()  # nothing left for him to do on it
        assert (
            f"Approved `deploy` `service=api environment=prod`, asked by <@{ALICE}>, by you "
            "(1 of 2), waiting for more approvers" in str(bobs)
        )
        assert _listed(await _open(h, CAROL)) == {interaction}  # still waits on her

        await h.slack.click_home(CAROL, ACTION_APPROVE, interaction_id=interaction)
        await h.bot.drain()
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        carols = str(await _open(h, CAROL))
        assert (
            f"Approved `deploy` `service=api environment=prod`, asked by <@{ALICE}>, "
            f"by you with <@{BOB}>" in carols
        )


async def test_recently_decided_hides_secret_looking_arguments(make_bot: BotFactory) -> None:
    async with make_bot(agents.secret_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _, interaction = await _ask(h, ALICE, "rotate it")
        assert _listed(await _open(h, BOB)) == {interaction}
        await h.slack.click_home(BOB, ACTION_APPROVE, interaction_id=interaction)
        await h.bot.drain()
        view = str(await _open(h, BOB))
    assert "Recently decided" in view and "[redacted]" in view
    assert agents.SECRET_VALUE not in view
