"""Edit before approve over real HTTP, on both stores: "Edit and approve…" opens a form pre-filled
with the call's arguments; an invalid edit gets inline errors and changes nothing; a valid one
runs the tool with the edited arguments and the model is told what changed; secrets cannot be
edited; only someone who may approve can submit it; the audit log keeps both versions."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from slack_sdk.models.views import View

from blocks import ACTION_APPROVE, ACTION_EDIT
from bot import Agent, Approval, Tool
from bot.testing import FunctionModel

from .._local_slack import OpenedView
from .conftest import ALICE, BOB, CAROL, CHANNEL, BotFactory, Harness

RAN: list[dict[str, str]] = []
"""What the pretend deploy did, token included, so tests see the arguments it really got."""
SEEN: list[str] = []
"""Every tool result the model was shown."""
THREADS: dict[str, str] = {}
"""Interaction id -> the thread its card is in."""


def deploy(
    service: Literal["api", "web"],
    version: str,
    environment: Literal["staging", "prod"] = "staging",
    token: str = "",
) -> str:
    """Deploy a version of a service."""
    RAN.append({"service": service, "version": version, "environment": environment, "token": token})
    return f"deployed {service} {version} to {environment}"


def _respond(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = messages[-1]
    if last["role"] == "tool":
        SEEN.append(str(last["content"]))
        return f"Tool said: {last['content']}"
    arguments = {"service": "api", "version": "2.3", "token": "s3cret-t0ken"}
    return [{"name": "deploy", "arguments": arguments}]


def _agent(rule: Approval | bool) -> Agent:
    return Agent(
        name="editor", model=FunctionModel(_respond), tools=[Tool(deploy, requires_approval=rule)]
    )


editable_agent = _agent(Approval(editable=True))


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()
    SEEN.clear()


async def _open_form(h: Harness, user: str = BOB) -> tuple[str, OpenedView]:
    """Alice asks for a deploy; `user` clicks Edit and approve. The interaction and the form."""
    asked = await h.mention(ALICE, "deploy api 2.3")
    card = h.card(asked.ts)
    THREADS[h.interaction_id(card)] = asked.ts
    assert ACTION_EDIT in str(card.blocks)
    assert await h.click(user, card.ts, ACTION_EDIT) == 200
    [view] = [v for v in h.slack.views.values() if v.user == user]
    View(**view.view).validate_json()
    return h.interaction_id(card), view


def _blocks(view: OpenedView) -> dict[str, str]:
    """Input block ids by label."""
    return {b["label"]["text"]: b["block_id"] for b in view.view["blocks"] if b["type"] == "input"}


def _values(view: OpenedView, **by_label: str) -> dict[str, str]:
    """What a person submits: the pre-filled values, changed where `by_label` says (TestSlack
    does not carry initial values into the state as Slack does, so every field is given)."""
    shown = {"Service": "api", "Version": "2.3", "Environment": "staging"}
    blocks = _blocks(view)
    return {blocks[label]: value for label, value in {**shown, **by_label}.items()}


async def _interaction(h: Harness, iid: str) -> Any:
    stored = await h.store.get_interaction(iid)
    assert stored is not None
    return stored


async def test_the_form_is_prefilled_and_keeps_secrets_out(make_bot: BotFactory) -> None:
    async with make_bot(editable_agent) as h:
        _, view = await _open_form(h)
        inputs = {b["label"]["text"]: b for b in view.view["blocks"] if b["type"] == "input"}
        assert sorted(inputs) == ["Environment", "Service", "Version"]
        assert inputs["Version"]["element"]["initial_value"] == "2.3"
        assert inputs["Service"]["element"]["initial_option"]["value"] == "0"
        assert "s3cret" not in json.dumps(view.view)
        assert "`token`" in json.dumps(view.view)  # named as kept, with no input


async def test_an_invalid_edit_gets_inline_errors_and_changes_nothing(
    make_bot: BotFactory,
) -> None:
    async with make_bot(editable_agent) as h:
        iid, view = await _open_form(h)
        version = _blocks(view)["Version"]
        response = await h.slack.submit_view(BOB, view.id, _values(view, Version=""))
        assert response.json() == {"response_action": "errors", "errors": {version: "Required"}}
        await h.bot.drain()
        assert RAN == [] and SEEN == []
        stored = await _interaction(h, iid)
        assert stored.status == "pending"
        assert ACTION_APPROVE in str(h.card(THREADS[iid]).blocks)  # the card is still open


async def test_a_valid_edit_runs_the_tool_with_it_and_the_model_is_told(
    make_bot: BotFactory,
) -> None:
    async with make_bot(editable_agent) as h:
        iid, view = await _open_form(h)
        thread_ts = THREADS[iid]
        edited = _values(view, Version="2.4", Environment="prod")
        response = await h.slack.submit_view(BOB, view.id, edited)
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()

        assert RAN == [
            {"service": "api", "version": "2.4", "environment": "prod", "token": "s3cret-t0ken"}
        ]
        assert SEEN == [
            "The approver changed the arguments: version '2.3' -> '2.4', "
            "environment 'staging' -> 'prod'.\ndeployed api 2.4 to prod"
        ]
        assert h.texts(thread_ts)[-1].startswith("Tool said: The approver changed")
        stored = await _interaction(h, iid)
        assert stored.status == "answered" and stored.answered_by == BOB
        closed = str(h.card(thread_ts).blocks)
        assert "Edited the arguments before approving" in closed and "`2.4`" in closed
        assert ACTION_APPROVE not in closed

        [entry] = [e for e in await h.store.recent_audit() if e.action == "answered"]
        detail = json.loads(entry.detail)
        assert detail["arguments"]["original"]["version"] == "2.3"
        assert detail["arguments"]["edited"]["version"] == "2.4"
        assert detail["arguments"]["edited"]["token"] == "[redacted]"
        assert "s3cret" not in entry.detail


async def test_a_tampered_submission_cannot_edit_a_secret(make_bot: BotFactory) -> None:
    async with make_bot(editable_agent) as h:
        iid, view = await _open_form(h)
        payload = h.slack.view_submission_payload(BOB, view.id, _values(view, Version="2.4"))
        for part in ("p3", "token"):
            payload["view"]["state"]["values"][f"hb|{iid}|{part}"] = {
                "hb:input": {"type": "plain_text_input", "value": "stolen"}
            }
        response = await h.slack.send_interactivity(payload)
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        assert [r["token"] for r in RAN] == ["s3cret-t0ken"]
        assert [r["version"] for r in RAN] == ["2.4"]


async def test_only_someone_who_may_approve_can_edit(make_bot: BotFactory) -> None:
    async with make_bot(editable_agent, HANDBACK_APPROVERS=BOB) as h:
        asked = await h.mention(ALICE, "deploy api 2.3")
        card = h.card(asked.ts)
        for user in (CAROL, ALICE):  # not an approver; the requester
            await h.click(user, card.ts, ACTION_EDIT)
            assert not [v for v in h.slack.views.values() if v.user == user]
        assert "may approve `deploy`" in h.ephemerals(CAROL)[-1]
        assert "someone else" in h.ephemerals(ALICE)[-1]

        # Bob's form, submitted as Carol (a forged payload): refused inline, and audited.
        await h.click(BOB, card.ts, ACTION_EDIT)
        [view] = list(h.slack.views.values())
        payload = h.slack.view_submission_payload(BOB, view.id, _values(view, Version="2.4"))
        payload["user"] = {"id": CAROL, "username": "carol", "name": "carol", "team_id": "T"}
        response = await h.slack.send_interactivity(payload)
        body = response.json()
        assert body["response_action"] == "errors"
        assert "may approve `deploy`" in next(iter(body["errors"].values()))
        await h.bot.drain()
        assert RAN == []
        stored = await _interaction(h, h.interaction_id(card))
        assert stored.status == "pending"
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert {e.user for e in refused} == {CAROL, ALICE}

        assert (await h.slack.submit_view(BOB, view.id, _values(view, Version="2.4"))).status == 200
        await h.bot.drain()
        assert [r["version"] for r in RAN] == ["2.4"]


async def test_no_edit_unless_the_rule_allows_it(make_bot: BotFactory) -> None:
    async with make_bot(_agent(True)) as h:
        asked = await h.mention(ALICE, "deploy api 2.3")
        card = h.card(asked.ts)
        assert ACTION_EDIT not in str(card.blocks)
        # A forged click on a button the card never had opens nothing.
        payload = h.slack.block_actions_payload(BOB, card.ts, ACTION_APPROVE)
        payload["actions"][0]["action_id"] = ACTION_EDIT
        assert (await h.slack.send_interactivity(payload)).status == 200
        await h.bot.drain()
        assert not h.slack.views
        assert "cannot be edited" in h.ephemerals(BOB)[-1]
        stored = await _interaction(h, h.interaction_id(card))
        assert stored.status == "pending"


def _by_environment(
    service: str, version: str, environment: str = "staging", token: str = ""
) -> Approval:
    """Two approvers for prod, one elsewhere: an edit must not move a call between them."""
    return Approval(count=2) if environment == "prod" else Approval(editable=True)


async def test_an_edit_that_needs_another_rule_is_refused_inline_whatever_the_hidden_token(
    make_bot: BotFactory,
) -> None:
    async with make_bot(_agent(_by_environment)) as h:
        asked = await h.mention(ALICE, "deploy api 2.3")
        card = h.card(asked.ts)
        iid = h.interaction_id(card)
        await h.click(BOB, card.ts, ACTION_EDIT)
        [view] = list(h.slack.views.values())
        # The token is hidden (and its default is empty): the policy is asked with what it
        # could stand for, and prod needs two approvers whatever it is.
        response = await h.slack.submit_view(BOB, view.id, _values(view, Environment="prod"))
        body = response.json()
        assert body["response_action"] == "errors"
        assert "needs a different approval" in next(iter(body["errors"].values()))
        await h.bot.drain()
        assert RAN == [] and (await _interaction(h, iid)).status == "pending"
        assert "Approved" not in str(h.card(asked.ts).blocks)
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [(e.user, e.interaction_id) for e in refused] == [(BOB, iid)]
        assert "needs a different approval" in str(refused[0].detail)
        assert "s3cret-t0ken" not in str(await h.store.recent_audit())


def _open_respond(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = messages[-1]
    if last["role"] == "tool":
        SEEN.append(str(last["content"]))
        return f"Tool said: {last['content']}"
    return [{"name": "deploy", "arguments": {"service": "api", "version": "2.3"}}]


async def test_a_rule_change_is_told_inline_when_every_argument_is_shown(
    make_bot: BotFactory,
) -> None:
    def release(
        service: Literal["api", "web"],
        version: str,
        environment: Literal["staging", "prod"] = "staging",
    ) -> str:
        return deploy(service, version, environment)

    tool = Tool(release, name="deploy", requires_approval=_by_environment)
    agent = Agent(name="editor", model=FunctionModel(_open_respond), tools=[tool])
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "deploy api 2.3")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_EDIT)
        [view] = list(h.slack.views.values())
        response = await h.slack.submit_view(BOB, view.id, _values(view, Environment="prod"))
        body = response.json()
        assert body["response_action"] == "errors"
        assert "needs a different approval" in next(iter(body["errors"].values()))
        await h.bot.drain()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending" and RAN == []

        response = await h.slack.submit_view(BOB, view.id, _values(view, Version="2.5"))
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        assert [(r["version"], r["environment"]) for r in RAN] == [("2.5", "staging")]


def _two_deploys(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Deploy api, then (after its result) web, in one turn."""
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return [{"name": "deploy", "arguments": {"service": "api", "version": "2.3"}}]
    if len(results) == 1:
        return [{"name": "deploy", "arguments": {"service": "web", "version": "2.3"}}]
    return f"Tool said: {results[-1]['content']}"


async def test_an_edit_shapes_the_turn_so_its_editor_cannot_approve_the_next_call(
    make_bot: BotFactory,
) -> None:
    """Four eyes: the edited arguments are the approver's words in the conversation, like a
    denial's reason; the next approval of the same turn needs someone else."""
    agent = Agent(
        name="editor",
        model=FunctionModel(_two_deploys),
        tools=[Tool(deploy, requires_approval=Approval(editable=True))],
    )
    async with make_bot(agent) as h:
        asked = await h.mention(ALICE, "deploy api and web")
        first = h.card(asked.ts)
        await h.click(BOB, first.ts, ACTION_EDIT)
        [view] = list(h.slack.views.values())
        await h.slack.submit_view(BOB, view.id, _values(view, Version="2.4"))
        await h.bot.drain()
        second = h.card(asked.ts)
        assert second.ts != first.ts and [r["service"] for r in RAN] == ["api"]

        await h.click(BOB, second.ts, ACTION_APPROVE)
        assert "someone else has to approve it" in h.ephemerals(BOB)[-1]
        assert [r["service"] for r in RAN] == ["api"]
        await h.click(CAROL, second.ts, ACTION_APPROVE)
        assert [(r["service"], r["version"]) for r in RAN] == [("api", "2.4"), ("web", "2.3")]


def _channel_agent(channel_rule: Any) -> Agent:
    """A deploy whose own rule allows no edit; in the test channel its rule is `channel_rule`."""
    return Agent(
        name="editor",
        model=FunctionModel(_respond),
        tools=[Tool(deploy, requires_approval=True)],
        channel_rules={CHANNEL: {"deploy": channel_rule}},
    )


async def test_an_edit_allowed_by_the_channels_rule_runs(make_bot: BotFactory) -> None:
    async with make_bot(_channel_agent(Approval(editable=True))) as h:
        iid, view = await _open_form(h)
        response = await h.slack.submit_view(BOB, view.id, _values(view, Version="2.4"))
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        assert [r["version"] for r in RAN] == ["2.4"]
        assert (await _interaction(h, iid)).status == "answered"
        [entry] = [e for e in await h.store.recent_audit() if e.action == "answered"]
        assert json.loads(entry.detail)["arguments"]["edited"]["token"] == "[redacted]"


async def test_an_edit_that_needs_another_channel_rule_is_refused_inline(
    make_bot: BotFactory,
) -> None:
    async with make_bot(_channel_agent(_by_environment)) as h:
        iid, view = await _open_form(h)
        response = await h.slack.submit_view(BOB, view.id, _values(view, Environment="prod"))
        body = response.json()
        assert body["response_action"] == "errors"
        assert "needs a different approval" in next(iter(body["errors"].values()))
        await h.bot.drain()
        assert RAN == [] and (await _interaction(h, iid)).status == "pending"
