"""Slash commands over real HTTP against LocalSlack: `/deploy api 2.3 prod` runs the tool through
the approval gate in a thread of its own; text that does not make valid arguments opens the
tool's form, pre-filled, whose submission runs the same way; unknown commands (and bad ones
whose form Slack did not open) are answered plainly."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

import pytest
from slack_sdk.models.views import View

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.slack import SlackBot, load_settings
from bot.testing import FunctionModel
from state import open_store

from .._local_slack import TestSlack
from .conftest import ALICE, BOB, CHANNEL, DAVE, BotFactory, Harness

DEPLOYS: list[dict[str, str]] = []


def deploy(
    service: Literal["api", "web"], version: str, environment: str = "staging", replicas: int = 1
) -> str:
    """Deploy a version of a service."""
    DEPLOYS.append({"service": service, "version": version, "environment": environment})
    return f"Deployed {service} {version} to {environment} ({replicas})."


def rotate(service: str, token: str = "hunter2-default") -> str:
    """Rotate a service's token."""
    DEPLOYS.append({"service": service, "token": token})
    return f"Rotated {service}."


def _never(messages: list[dict[str, Any]]) -> Any:
    raise AssertionError("a command must not call the model")


def _agent() -> Agent:
    tool = Tool(deploy, requires_approval=True, command="/deploy")
    return Agent(name="ops", model=FunctionModel(_never), tools=[tool])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    DEPLOYS.clear()


async def test_a_command_runs_the_tool_through_the_gate(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api 2.3 environment=prod")
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert opening.text == f"<@{ALICE}> ran /deploy service=api version=2.3 environment=prod"
        card = h.card(opening.ts)
        assert card.thread_ts == opening.ts and DEPLOYS == []
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.requester == ALICE
        assert record.payload["arguments"] == {
            "service": "api",
            "version": "2.3",
            "environment": "prod",
            "replicas": 1,
        }

        await h.click(DAVE, card.ts, ACTION_APPROVE)  # not an approver: refused like any card
        assert DEPLOYS == [] and any("approve" in t.lower() for t in h.ephemerals(DAVE))
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert DEPLOYS == [{"service": "api", "version": "2.3", "environment": "prod"}]
        assert h.texts(opening.ts)[-1] == "Deployed api 2.3 to prod (1)."


async def test_a_command_arrives_as_typed_whatever_its_characters(make_bot: BotFactory) -> None:
    """The form Slack posts is read once, at the edge, and Bolt is handed that reading: text
    with escapes, `+`, `&`, `=`, non-ASCII and even the word `payload` (on which Bolt's own
    reading of a form gives up) reaches the tool as typed."""
    version = "2.3+b%41&x=é;payload=1"
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/deploy", f"api {version}")
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        record = await h.store.get_interaction(h.interaction_id(h.card(opening.ts)))
        assert record is not None
        assert record.payload["arguments"]["version"] == version


async def test_a_bad_command_whose_form_does_not_open_gets_the_usage(
    make_bot: BotFactory,
) -> None:
    async with make_bot(_agent()) as h:
        for _ in range(3):  # an expired trigger: Slack refuses to open the form
            h.slack.fail_next("views.open", status=400)
        missing = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api")
        invalid = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "moon 2.3")
        quote = await h.slack.run_command(ALICE, CHANNEL, "/deploy", 'api "2.3')
        await h.bot.drain()
        assert [r.status for r in (missing, invalid, quote)] == [200, 200, 200]
        said = h.ephemerals(ALICE)
        assert len(said) == 3
        assert said[0].startswith("Missing `version`.")
        assert said[1].startswith("`service`: Choose one of the options")
        assert said[2].startswith("A quote is not closed.")
        usage = (
            "Usage: `/deploy &lt;service: api|web&gt; &lt;version&gt; "
            "[environment=staging] [replicas=1]`"
        )
        assert all(usage in text and "Traceback" not in text for text in said)
        assert h.slack.bot_messages() == [] and DEPLOYS == [] and h.slack.views == {}
        audit = await h.store.recent_audit()
        assert sum(1 for e in audit if e.action == "refused" and e.user == ALICE) == 3


async def test_an_unknown_command_is_refused_plainly(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/rollback", "api")
        await h.bot.drain()
        assert response.status == 200
        assert h.ephemerals(ALICE) == ["`/rollback` is not one of my commands (mine: `/deploy`)."]
        assert h.slack.bot_messages() == []


async def test_a_command_whose_tool_the_channel_is_not_offered_is_refused(
    make_bot: BotFactory,
) -> None:
    tool = Tool(deploy, requires_approval=True, command="/deploy")
    agent = Agent(
        name="ops", model=FunctionModel(_never), tools=[tool], channels={"C0DEPLOYS": ["deploy"]}
    )
    async with make_bot(agent, HANDBACK_APPROVERS="S0OPS") as h:
        response = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "api 2.3")
        await h.bot.drain()
        assert response.status == 200
        assert h.ephemerals(ALICE) == ["`/deploy` is not offered in this channel."]
        assert h.slack.bot_messages() == [] and DEPLOYS == []


async def test_a_redelivered_command_runs_once(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        first = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        again = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        await h.bot.drain()
        assert first.status == again.status == 200
        openings = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert len(openings) == 1
        card = h.card(openings[0].ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        late = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "web 1.0", trigger_id="t.1")
        await h.bot.drain()
        assert late.status == 200
        assert DEPLOYS == [{"service": "web", "version": "1.0", "environment": "staging"}]
        assert len([m for m in h.slack.bot_messages() if m.thread_ts is None]) == 1


async def test_a_command_is_a_signed_form_post(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        forged = await h.slack.send_raw(
            "command=%2Fdeploy&text=api+1&user_id=U0ALICE&channel_id=C0GENERAL&trigger_id=x",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            sign=False,
        )
        malformed = await h.slack.send_raw(
            "command=%2Fdeploy&text=api+1",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )
        await h.bot.drain()
        assert (forged.status, malformed.status) == (401, 400)
        assert h.slack.bot_messages() == [] and DEPLOYS == []


async def test_a_command_over_socket_mode(slack: TestSlack, store_url: str) -> None:
    settings = load_settings(
        slack_bot_token=slack.bot_token,
        slack_app_token=slack.app_token,
        slack_api_url=slack.api_url,
        handback_store=store_url,
        handback_approvers="anyone",
    )
    slack.delivery = "socket"
    stop = asyncio.Event()
    async with (
        open_store(store_url) as store,
        SlackBot(agent=_agent(), store=store, settings=settings, loops=False) as bot,
    ):
        connection = asyncio.create_task(bot.run_socket_mode(slack.app_token, stop))
        try:
            await slack.wait_for(lambda: slack.socket_connected)
            bad = await slack.run_command(ALICE, CHANNEL, "/deploy", "api")
            good = await slack.run_command(ALICE, CHANNEL, "/deploy", "web 3.1 prod")
            await bot.drain()
            assert (bad.status, good.status) == (200, 200)
            [form] = slack.views.values()  # the bad one opened its form, as over HTTP
            assert form.user == ALICE and slack.ephemerals_for(ALICE) == []
            [opening] = [m for m in slack.bot_messages() if m.thread_ts is None]
            [card] = slack.bot_messages(thread_ts=opening.ts)
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            await bot.drain()
            assert DEPLOYS == [{"service": "web", "version": "3.1", "environment": "prod"}]
        finally:
            stop.set()
            await connection


def _inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The form's input blocks by label."""
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


async def _open_form(h: Harness, text: str, *, user: str = ALICE) -> tuple[str, dict[str, str]]:
    """Type `/deploy text`; the id of the form it opened and its block ids by label."""
    response = await h.slack.run_command(user, CHANNEL, "/deploy", text)
    await h.bot.drain()
    assert response.status == 200 and not response.body.strip()
    [opened] = h.slack.views.values()
    assert opened.user == user and not opened.closed
    View(**opened.view).validate_json()  # slack_sdk's own model of a modal accepts it
    ids = {label: block["block_id"] for label, block in _inputs(opened.view).items()}
    return opened.id, ids


async def test_a_command_missing_arguments_opens_a_prefilled_form(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        view_id, ids = await _open_form(h, "api")
        view = h.slack.views[view_id].view
        assert view["callback_id"] == "hb:command_modal"
        assert json.loads(view["private_metadata"]) == {
            "command": "/deploy",
            "channel": CHANNEL,
            "user": ALICE,
        }
        inputs = _inputs(view)
        assert list(ids) == ["Service", "Version", "Environment", "Replicas"]
        assert inputs["Service"]["element"]["initial_option"]["text"]["text"] == "api"
        assert "initial_value" not in inputs["Version"]["element"]
        # Only what was typed: a default is not put in a field.
        assert "initial_value" not in inputs["Environment"]["element"]
        assert "Missing `version`." in view["blocks"][0]["text"]["text"]
        assert h.ephemerals(ALICE) == [] and h.slack.bot_messages() == [] and DEPLOYS == []


async def test_an_invalid_value_keeps_what_fits(make_bot: BotFactory) -> None:
    async with make_bot(_agent()) as h:
        view_id, _ = await _open_form(h, "moon 2.3 environment=prod")
        inputs = _inputs(h.slack.views[view_id].view)
        assert "initial_option" not in inputs["Service"]["element"]
        assert inputs["Version"]["element"]["initial_value"] == "2.3"
        assert inputs["Environment"]["element"]["initial_value"] == "prod"


async def test_a_form_with_an_invalid_value_gets_an_inline_error(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        view_id, ids = await _open_form(h, "api")
        values = {ids["Service"]: "api", ids["Version"]: "2.3", ids["Replicas"]: "two"}
        response = await h.slack.submit_view(ALICE, view_id, values)
        await h.bot.drain()
        assert response.json() == {
            "response_action": "errors",
            "errors": {ids["Replicas"]: "Enter a whole number"},
        }
        assert not h.slack.views[view_id].closed
        assert h.slack.bot_messages() == [] and DEPLOYS == []


async def test_a_submitted_form_runs_through_the_gate_once(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        view_id, ids = await _open_form(h, "api")
        values = {ids["Service"]: "api", ids["Version"]: "2.3", ids["Environment"]: "prod"}
        payload = h.slack.view_submission_payload(ALICE, view_id, values)
        response = await h.slack.submit_view(ALICE, view_id, values)
        assert response.status == 200 and not response.body.strip()
        await h.bot.drain()
        again = await h.slack.send_interactivity(payload)  # Slack delivers it again
        await h.bot.drain()
        assert again.status == 200
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert opening.text == f"<@{ALICE}> ran /deploy service=api version=2.3 environment=prod"
        card = h.card(opening.ts)
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.requester == ALICE
        assert record.payload["arguments"] == {
            "service": "api",
            "version": "2.3",
            "environment": "prod",
            "replicas": 1,
        }
        await h.click(DAVE, card.ts, ACTION_APPROVE)  # not an approver: refused like any card
        assert DEPLOYS == [] and any("approve" in t.lower() for t in h.ephemerals(DAVE))
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert DEPLOYS == [{"service": "api", "version": "2.3", "environment": "prod"}]
        assert h.texts(opening.ts)[-1] == "Deployed api 2.3 to prod (1)."
        await h.slack.send_interactivity(payload)
        await h.bot.drain()
        assert len(DEPLOYS) == 1
        assert len([m for m in h.slack.bot_messages() if m.thread_ts is None]) == 1


async def test_a_form_submitted_by_someone_else_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        view_id, ids = await _open_form(h, "api")
        values = {ids["Service"]: "web", ids["Version"]: "9"}
        payload = h.slack.view_submission_payload(ALICE, view_id, values)
        payload["user"] = {"id": BOB, "username": "bob", "name": "bob", "team_id": "T0LOCAL"}
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        body = response.json()
        assert body["response_action"] == "errors"
        assert "Only the person who typed the command" in json.dumps(body["errors"])
        assert h.slack.bot_messages() == [] and DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [BOB]


async def test_a_form_from_another_workspace_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        view_id, ids = await _open_form(h, "api")
        values = {ids["Service"]: "web", ids["Version"]: "9"}
        payload = h.slack.view_submission_payload(ALICE, view_id, values)
        payload["team"]["id"] = payload["user"]["team_id"] = "T0OTHER"
        response = await h.slack.send_interactivity(payload)
        await h.bot.drain()
        body = response.json()
        assert body["response_action"] == "errors"
        assert "does not come from this app's workspace" in json.dumps(body["errors"])
        assert h.slack.bot_messages() == [] and DEPLOYS == []
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [e.user for e in refused] == [ALICE]


async def test_a_secret_parameter_shows_only_what_was_typed(make_bot: BotFactory) -> None:
    tool = Tool(rotate, command="/rotate")
    agent = Agent(name="ops", model=FunctionModel(_never), tools=[tool])
    async with make_bot(agent) as h:
        await h.slack.run_command(ALICE, CHANNEL, "/rotate", "")
        await h.bot.drain()
        [opened] = h.slack.views.values()
        View(**opened.view).validate_json()
        assert "hunter2" not in json.dumps(opened.view)
        ids = {label: b["block_id"] for label, b in _inputs(opened.view).items()}
        values = {ids["Service"]: "api", ids["Token"]: "s3cret-typed"}
        assert (await h.slack.submit_view(ALICE, opened.id, values)).status == 200
        await h.bot.drain()
        assert DEPLOYS == [{"service": "api", "token": "s3cret-typed"}]
        [opening] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert "s3cret" not in opening.text and "[redacted]" in opening.text
