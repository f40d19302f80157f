"""Approvals are checked at the click and again just before the run resumes, the second time
with user groups read fresh from Slack: someone taken off the list in between does not count."""

from __future__ import annotations

import asyncio

from blocks import ACTION_APPROVE
from state import AuditEntry

from ..conftest import answer_only
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness, calls_to

NOTE = f"<@{BOB}>'s approval was withdrawn: no longer on the approvers list"


def regroup(h: Harness, members: list[str]) -> None:
    """The ops group now has `members`; time moves past what a fresh read of it may be."""
    h.slack.usergroups["S0OPS"] = members
    h.clock.pass_fresh_reads()


def shown(h: Harness, channel: str, ts: str) -> str:
    message = h.slack.message(channel, ts)
    assert message is not None
    return str(message.blocks)


async def test_an_approver_removed_before_the_resume_is_withdrawn(make_bot: BotFactory) -> None:
    async with make_bot(agents.group_approved_agent) as h:
        asked = await h.mention(ALICE, "deploy api and web")
        api, web = h.cards(asked.ts)

        await h.click(BOB, api.ts, ACTION_APPROVE)
        assert "Approved" in shown(h, api.channel, api.ts)
        # Bob leaves the group after his click (the bot's cached membership still has him).
        regroup(h, [CAROL])
        await h.click(CAROL, web.ts, ACTION_APPROVE)

        assert agents.DEPLOYS == []
        reopened = shown(h, api.channel, api.ts)
        assert NOTE in reopened and ACTION_APPROVE in reopened
        record = await h.store.get_interaction(h.interaction_id(api))
        assert record is not None
        assert (record.status, record.answered_by, record.answer) == ("pending", None, None)
        run = await h.store.load_run(record.run_id)
        assert run is not None and (run.status, run.resumed_by) == ("paused", None)
        audit = [e for e in reversed(await h.store.recent_audit()) if e.action == "withdrawn"]
        assert [(e.user, e.interaction_id) for e in audit] == [(BOB, record.interaction_id)]
        assert "no longer on the approvers list" in audit[0].detail

        # Bob cannot approve it again; carol, still on the list, can, and the run goes on.
        await h.click(BOB, api.ts, ACTION_APPROVE)
        assert "not on the list" in h.ephemerals(BOB)[-1]
        assert agents.DEPLOYS == []
        await h.click(CAROL, api.ts, ACTION_APPROVE)
        assert sorted(d["service"] for d in agents.DEPLOYS) == ["api", "web"]
        assert h.texts(asked.ts)[-1].startswith("Tool said: deployed")


async def test_approvers_still_on_the_list_resume_at_once(make_bot: BotFactory) -> None:
    async with make_bot(agents.group_approved_agent) as h:
        asked = await h.mention(ALICE, "deploy api and web")
        api, web = h.cards(asked.ts)
        await h.click(BOB, api.ts, ACTION_APPROVE)
        h.clock.pass_fresh_reads()  # Bob's fresh read is too old for Carol's claim
        lookups = len(calls_to(h.slack, "usergroups.users.list"))
        await h.click(CAROL, web.ts, ACTION_APPROVE)
        assert sorted(d["service"] for d in agents.DEPLOYS) == ["api", "web"]
        # Carol's click was checked against the cache, then Slack was asked once: for her
        # claim; the resume's check of both approvals, moments later, used that same read.
        assert len(calls_to(h.slack, "usergroups.users.list")) == lookups + 1
        assert "withdrawn" not in [e.action for e in await h.store.recent_audit()]


async def test_the_click_is_checked_with_fresh_membership(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        first = await h.mention(ALICE, "deploy api to prod")
        await h.click(BOB, h.card(first.ts).ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 1  # and the bot has cached the group with bob in it

        regroup(h, [CAROL])
        second = await h.mention(ALICE, "deploy api to prod again")
        card = h.card(second.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 1
        assert "not on the list" in h.ephemerals(BOB)[-1]
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert refused and refused[0].user == BOB

        await h.click(CAROL, card.ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 2


async def test_recovery_checks_the_approvals_again_too(make_bot: BotFactory) -> None:
    async with make_bot(agents.group_approved_agent) as h:
        asked = await h.mention(ALICE, "deploy api and web")
        api, web = h.cards(asked.ts)
        # Both answers taken, then the process died before the resume (straight in the store).
        for card, user in ((api, BOB), (web, CAROL)):
            claim = await answer_only(
                h.store, h.interaction_id(card), answer=True, answered_by=user, now=h.clock()
            )
            assert claim.won
        regroup(h, [CAROL])

        assert await h.bot.answers.recover() == 1
        await h.bot.drain()
        assert agents.DEPLOYS == []
        assert NOTE in shown(h, api.channel, api.ts)
        assert [e.user for e in await h.store.recent_audit() if e.action == "withdrawn"] == [BOB]

        await h.click(CAROL, api.ts, ACTION_APPROVE)
        assert sorted(d["service"] for d in agents.DEPLOYS) == ["api", "web"]


# The two-person rule: every vote that counts is checked again, not only the last voter's.

ONE_OF_TWO = f"1 of 2 approved:* <@{CAROL}>"


async def _withdrawn(h: Harness) -> list[tuple[str | None, str | None, str]]:
    return [
        (e.user, e.interaction_id, e.detail)
        for e in reversed(await h.store.recent_audit())
        if e.action == "withdrawn"
    ]


async def test_an_earlier_voter_removed_before_the_last_vote_is_withdrawn(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.two_person_group_agent) as h:
        regroup(h, [BOB, CAROL, DAVE])
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert f"1 of 2 approved:* <@{BOB}>" in shown(h, card.channel, card.ts)
        # Bob leaves the group after his vote (the bot's cached membership still has him).
        regroup(h, [CAROL, DAVE])
        await h.click(CAROL, card.ts, ACTION_APPROVE)

        # Carol's vote counts as the first of two: bob's no longer does, so nothing runs.
        assert agents.DEPLOYS == []
        card_now = shown(h, card.channel, card.ts)
        assert ONE_OF_TWO in card_now and NOTE in card_now and ACTION_APPROVE in card_now
        ix = h.interaction_id(card)
        record = await h.store.get_interaction(ix)
        assert record is not None and record.status == "pending"
        assert [v.user for v in record.votes] == [CAROL]
        withdrawn = await _withdrawn(h)
        assert withdrawn == [(BOB, ix, "no longer on the approvers list")]
        assert h.ephemerals(CAROL) == []

        # Dave, in the group, gives the second approval: the tool runs, once.
        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        record = await h.store.get_interaction(ix)
        assert record is not None and record.answer == {
            "approved": True,
            "approvers": [CAROL, DAVE],
        }
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"
        assert await _withdrawn(h) == withdrawn


async def test_a_removed_voter_in_an_answered_two_person_approval_is_withdrawn_at_resume(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.two_person_group_pair_agent) as h:
        regroup(h, [BOB, CAROL, DAVE])
        asked = await h.mention(ALICE, "deploy api and web")
        api, web = h.cards(asked.ts)
        # Api is approved by two while both are in the group; the run still waits for web.
        await h.click(BOB, api.ts, ACTION_APPROVE)
        await h.click(CAROL, api.ts, ACTION_APPROVE)
        assert "Approved" in shown(h, api.channel, api.ts)
        regroup(h, [CAROL, DAVE])
        # Web's two votes are in: the resume checks api's approvals again, bob's among them.
        await h.click(CAROL, web.ts, ACTION_APPROVE)
        await h.click(DAVE, web.ts, ACTION_APPROVE)

        assert agents.DEPLOYS == []
        reopened = shown(h, api.channel, api.ts)
        assert ONE_OF_TWO in reopened and NOTE in reopened and ACTION_APPROVE in reopened
        ix = h.interaction_id(api)
        record = await h.store.get_interaction(ix)
        assert record is not None
        assert (record.status, record.answered_by, record.answer) == ("pending", None, None)
        assert [v.user for v in record.votes] == [CAROL]
        run = await h.store.load_run(record.run_id)
        assert run is not None and (run.status, run.resumed_by) == ("paused", None)
        assert await _withdrawn(h) == [(BOB, ix, "no longer on the approvers list")]

        # Dave gives api its second approval: the run resumes with both deploys, once each.
        await h.click(DAVE, api.ts, ACTION_APPROVE)
        assert sorted(d["service"] for d in agents.DEPLOYS) == ["api", "web"]
        record = await h.store.get_interaction(ix)
        assert record is not None and record.answer["approvers"] == [CAROL, DAVE]
        assert h.texts(asked.ts)[-1].startswith("Tool said: deployed")


async def test_recovery_checks_every_vote_of_a_two_person_approval(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_person_group_agent) as h:
        regroup(h, [BOB, CAROL, DAVE])
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        ix = h.interaction_id(card)
        # Both votes taken, then the process died before the resume (straight in the store).
        for user in (BOB, CAROL):
            vote = await h.store.answer_and_claim(
                ix,
                answer={"approved": True},
                answered_by=user,
                now=h.clock(),
                audit=[AuditEntry(at=h.clock(), action="answered", user=user)] * 2,
                needed=2,
            )
            assert vote.won
        regroup(h, [CAROL, DAVE])

        assert await h.bot.answers.recover() == 1
        await h.bot.drain()
        assert agents.DEPLOYS == []
        reopened = shown(h, card.channel, card.ts)
        assert ONE_OF_TWO in reopened and NOTE in reopened
        assert await _withdrawn(h) == [(BOB, ix, "no longer on the approvers list")]

        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_a_burst_of_group_approvals_asks_slack_about_the_group_once(
    make_bot: BotFactory,
) -> None:
    """`usergroups.users.list` is rate limited (about 20 a minute): twenty approvals clicked at
    once share one fresh read of the group instead of making twenty (and their resumes reuse
    it), so none waits behind rate-limit retries; each still deploys once."""
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        asked = [await h.mention(ALICE, f"deploy api to prod {n}") for n in range(20)]
        cards = [h.card(message.ts) for message in asked]
        lookups = len(calls_to(h.slack, "usergroups.users.list"))
        clicked = await asyncio.gather(
            *(h.slack.click(BOB, card.ts, ACTION_APPROVE) for card in cards)
        )
        assert [response.status for response in clicked] == [200] * len(cards)
        await h.bot.drain()
        assert len(agents.DEPLOYS) == len(cards)
        # One for the click cache (a minute) and one fresh read, shared; not one per click.
        assert len(calls_to(h.slack, "usergroups.users.list")) - lookups <= 2

        regroup(h, [CAROL])  # and once fresh reads are old, a change is seen at once
        late = await h.mention(ALICE, "deploy api to prod late")
        await h.click(BOB, h.card(late.ts).ts, ACTION_APPROVE)
        assert "not on the list" in h.ephemerals(BOB)[-1]
        assert len(agents.DEPLOYS) == len(cards)
