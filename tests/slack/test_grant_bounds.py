"""A standing grant covers no more than what was approved, over real HTTP on both stores: not
another tool of the same name in a nested agent, not another requester, not another thread, not
other values of a pinned argument; not when its giver may no longer approve; and not at all when
it was stored before grants were bound (it needs renewal). Each refused use is a card (the tool
does not run) and an audit entry; each use is audited with its requester, arguments and grant."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from blocks import ACTION_APPROVE, ACTION_GRANT
from bot import Agent, Approval, Tool
from bot.testing import FunctionModel
from state import AuditEntry, Grant

from ..cli.test_cli_views import handback
from ..state.conftest import grant_id, overwrite_raw
from . import agents
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness

THREAD_GRANT = f"{ACTION_GRANT}:thread"
OLD_GRANT = Path(__file__).parent.parent / "state" / "fixtures" / "grant_before_binding.json"


def _buttons(h: Harness, thread: str) -> list[str]:
    return [
        element["action_id"]
        for block in h.card(thread).blocks
        if block["type"] == "actions"
        for element in block["elements"]
    ]


async def _refusals(h: Harness, grant_id: str) -> list[AuditEntry]:
    return [
        e for e in await h.store.recent_audit() if e.action == "refused" and grant_id in e.detail
    ]


async def _grant_in(h: Harness, thread: str) -> Grant:
    [grant] = await h.store.active_grants(now=h.clock())
    assert grant.thread_ts == thread
    return grant


# A nested agent with a tool of the same name as the outer agent's.

OUTER_RAN: list[str] = []
FLEET_WIPED: list[str] = []


def _grantop_outer(target: str) -> str:
    """Restart one host."""
    OUTER_RAN.append(target)
    return f"restarted {target}"


def _grantop_fleet(target: str) -> str:
    """Wipe the whole fleet."""
    FLEET_WIPED.append(target)
    return f"wiped {target}"


def _respond_with(call: dict[str, Any]) -> FunctionModel:
    def respond(messages: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        return f"Tool said: {last['content']}" if last["role"] == "tool" else [call]

    return FunctionModel(respond)


def _outer(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    if "fleet" in str(last["content"]):
        return [{"name": "fleet", "arguments": {"prompt": "grantop web1"}}]
    return [{"name": "grantop", "arguments": {"target": "web1"}}]


RULE = Approval(grants=("thread",))
nested_agent = Agent(
    name="ops",
    model=FunctionModel(_outer),
    tools=[
        Tool(_grantop_outer, name="grantop", requires_approval=RULE),
        Agent(
            name="fleet",
            description="Operates the fleet.",
            model=_respond_with({"name": "grantop", "arguments": {"target": "web1"}}),
            tools=[Tool(_grantop_fleet, name="grantop", requires_approval=RULE)],
        ),
    ],
)


async def test_a_grant_never_covers_a_same_named_tool_of_a_nested_agent(
    make_bot: BotFactory,
) -> None:
    OUTER_RAN.clear()
    FLEET_WIPED.clear()
    async with make_bot(nested_agent) as h:
        asked = await h.mention(ALICE, "restart web1")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        assert OUTER_RAN == ["web1"]
        grant = await _grant_in(h, asked.ts)
        assert (grant.tool, grant.path, grant.requesters) == ("grantop", "ops.grantop", (ALICE,))

        # The same tool again in the thread: under the grant.
        await h.reply(ALICE, asked.ts, "restart web1 again")
        assert OUTER_RAN == ["web1", "web1"] and len(h.cards(asked.ts)) == 1

        # The nested agent's `grantop` is another tool: a card, and nothing is wiped.
        await h.reply(ALICE, asked.ts, "ask the fleet")
        assert FLEET_WIPED == []
        assert len(h.cards(asked.ts)) == 2 and ACTION_APPROVE in _buttons(h, asked.ts)
        record = await h.store.get_interaction(h.interaction_id(h.card(asked.ts)))
        assert record is not None and record.runnable_path == "ops.fleet.grantop"
        [refused] = await _refusals(h, grant.grant_id)
        assert refused.user == ALICE and refused.interaction_id == record.interaction_id
        assert "ops.grantop" in refused.detail and "ops.fleet.grantop" in refused.detail
        # One notice, for the use on the same tool; none for the nested one.
        assert len([t for t in h.texts(asked.ts) if "runs without a card" in t]) == 1
    OUTER_RAN.clear()
    FLEET_WIPED.clear()


async def test_a_grant_covers_only_the_requester_of_the_request_it_was_given_on(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS="U0BOB,U0CAROL") as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        grant = await _grant_in(h, asked.ts)
        assert grant.requesters == (ALICE,)

        # Dave (who may approve nothing) asks in the same thread: a card, nothing runs.
        await h.reply(DAVE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 1 and len(h.cards(asked.ts)) == 2
        [refused] = await _refusals(h, grant.grant_id)
        assert refused.user == DAVE and "does not cover requests by" in refused.detail
        # Carol approves it on the card; bob's grant never named dave.
        await h.click(CAROL, h.card(asked.ts).ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 2

        # Another thread of the same channel: not covered either, even for alice.
        other = await h.mention(ALICE, "deploy api to dev")
        assert ACTION_APPROVE in _buttons(h, other.ts) and len(agents.DEPLOYS) == 2


named_agent = Agent(
    name="named",
    model=_respond_with({"name": "deploy", "arguments": {"service": "api", "environment": "dev"}}),
    tools=[
        Tool(agents.deploy, requires_approval=Approval(grants=("thread",), grant_requesters=[DAVE]))
    ],
)


async def test_a_grant_covers_the_people_its_rule_names(make_bot: BotFactory) -> None:
    async with make_bot(named_agent) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        card = h.card(asked.ts)
        labels = [
            e["text"]["text"]
            for b in card.blocks
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == THREAD_GRANT
        ]
        assert labels == ["Approve for this thread, for the requester and 1 more (1 h)"]
        assert f"requested by <@{ALICE}>, <@{DAVE}>" in str(card.blocks)
        await h.click(BOB, card.ts, THREAD_GRANT)
        grant = await _grant_in(h, asked.ts)
        assert grant.requesters == (ALICE, DAVE)
        await h.reply(DAVE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 2 and len(h.cards(asked.ts)) == 1
        await h.reply(CAROL, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 2 and len(h.cards(asked.ts)) == 2


def _deploy_as_said(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    found = re.search(r"deploy (\w+) to (\w+)", str(last["content"]))
    assert found is not None
    return [{"name": "deploy", "arguments": {"service": found[1], "environment": found[2]}}]


pinned_agent = Agent(
    name="pinned",
    model=FunctionModel(_deploy_as_said),
    tools=[
        Tool(
            agents.deploy,
            requires_approval=Approval(grants=("thread",), grant_arguments=["environment"]),
        )
    ],
)


async def test_a_grant_pinning_an_argument_covers_only_that_value(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(pinned_agent) as h:
        asked = await h.mention(ALICE, "deploy web to staging")
        card = h.card(asked.ts)
        assert "only with `environment` = `staging`" in str(card.blocks)
        await h.click(BOB, card.ts, THREAD_GRANT)
        grant = await _grant_in(h, asked.ts)
        assert grant.arguments == {"environment": "staging"}

        await h.reply(ALICE, asked.ts, "deploy api to staging")
        assert agents.DEPLOYS[-1] == {"service": "api", "environment": "staging"}
        assert len(h.cards(asked.ts)) == 1
        await h.reply(ALICE, asked.ts, "deploy api to production")
        assert len(agents.DEPLOYS) == 2 and len(h.cards(asked.ts)) == 2
        [refused] = await _refusals(h, grant.grant_id)
        assert "same `environment`" in refused.detail

        # The use is audited with whose request, which arguments, which grant and whose.
        uses = [
            e
            for e in await h.store.recent_audit()
            if e.action == "answered" and grant.grant_id in e.detail
        ]
        [use] = uses
        assert use.user == BOB
        assert f"requested by {ALICE}" in use.detail and f"given by {BOB}" in use.detail
        assert '"environment": "staging"' in use.detail and '"service": "api"' in use.detail
        assert "pinned.deploy" in use.detail


group_grant_agent = Agent(
    name="group_granter",
    model=_respond_with({"name": "deploy", "arguments": {"service": "api", "environment": "dev"}}),
    tools=[
        Tool(agents.deploy, requires_approval=Approval(approvers=["S0OPS"], grants=("thread",)))
    ],
)


async def test_a_grant_whose_giver_left_the_approvers_is_a_card_and_says_nothing_false(
    make_bot: BotFactory,
) -> None:
    async with make_bot(group_grant_agent) as h:
        h.slack.usergroups["S0OPS"] = [BOB, CAROL]
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        grant = await _grant_in(h, asked.ts)
        # Bob leaves the group; the bot's cached membership still has him.
        h.slack.usergroups["S0OPS"] = [CAROL]
        h.clock.pass_fresh_reads()

        await h.reply(ALICE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 1
        assert len(h.cards(asked.ts)) == 2 and ACTION_APPROVE in _buttons(h, asked.ts)
        assert not [t for t in h.texts(asked.ts) if "runs without a card" in t]
        [refused] = await _refusals(h, grant.grant_id)
        assert "its giver may not approve this now" in refused.detail
        record = await h.store.get_interaction(h.interaction_id(h.card(asked.ts)))
        assert record is not None and record.status == "pending"
        await h.click(CAROL, h.card(asked.ts).ts, ACTION_APPROVE)
        assert len(agents.DEPLOYS) == 2


async def _plant_old_grant(h: Harness, store_url: str, thread: str) -> Grant:
    """A grant as the code before bounds wrote it (`fixtures/grant_before_binding.json`: a bare
    tool name, no path, no requesters) in `thread`, times moved to now."""
    data = json.loads(OLD_GRANT.read_text())
    data.update(
        grant_id=grant_id("int_old"),
        thread_ts=thread,
        created_at=h.clock(),
        expires_at=h.clock() + 3600,
    )
    # Added by today's store (its indexes), then its JSON swapped for the old format.
    today = Grant(**data, path="granter.deploy", requesters=(ALICE,))
    assert await h.store.add_grant(today, audit=AuditEntry(at=h.clock(), action="granted"))
    await overwrite_raw(h.store, store_url, "grants", today.grant_id, json.dumps(data))
    return today


async def test_a_grant_stored_before_bounds_is_never_used_and_is_listed_for_renewal(
    make_bot: BotFactory, store_url: str
) -> None:
    async with make_bot(agents.grant_agent) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(CAROL, h.card(asked.ts).ts, ACTION_APPROVE)
        planted = await _plant_old_grant(h, store_url, asked.ts)
        old = await h.store.get_grant(planted.grant_id)
        assert old is not None and old.needs_renewal and old.path is None

        await h.reply(ALICE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 1 and len(h.cards(asked.ts)) == 2
        [refused] = await _refusals(h, old.grant_id)
        assert "stored before grants were bound" in refused.detail

        listed = await asyncio.to_thread(handback, "grants", "--store", store_url, "--limit", "10")
        assert listed.returncode == 0, listed.stderr
        assert old.grant_id in listed.stdout and "needs renewal" in listed.stdout
        args = ("grants", "--store", store_url, "--limit", "10", "--json")
        as_json = await asyncio.to_thread(handback, *args)
        assert as_json.returncode == 0, as_json.stderr
        assert json.loads(as_json.stdout)["needs_renewal"] is True

        assert (await h.slack.open_home(BOB)).status == 200
        await h.bot.drain()
        assert "needs renewal" in str(h.slack.home_view(BOB))


async def test_home_lists_grant_runs_apart_from_the_giver_s_own_approvals(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.grant_agent) as h:
        asked = await h.mention(ALICE, "deploy api to dev")
        await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT)
        grant = await _grant_in(h, asked.ts)
        await h.reply(ALICE, asked.ts, "deploy again")
        assert len(agents.DEPLOYS) == 2
        assert (await h.slack.open_home(BOB)).status == 200
        await h.bot.drain()
        view = h.slack.home_view(BOB)
        assert view is not None
        texts = [str(block) for block in view["blocks"]]
        [apart] = [i for i, t in enumerate(texts) if "Run under your standing grants" in t]
        [decided] = [i for i, t in enumerate(texts) if "Recently decided" in t]
        assert f"asked by <@{ALICE}>, under your grant `{grant.grant_id}`" in texts[apart + 1]
        assert "under your grant" not in texts[decided + 1]
        assert "Approved" in texts[decided + 1]


def test_an_old_grant_fixture_is_the_format_of_before() -> None:
    data = json.loads(OLD_GRANT.read_text())
    assert not {"path", "requesters", "arguments"} & set(data)
    assert replace(Grant(**data), path="x").needs_renewal  # no requesters: still not usable
