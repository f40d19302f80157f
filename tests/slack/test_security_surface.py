"""Attacks on App Home, modals, refusals and slash commands over real HTTP, on both stores,
as a workspace member or an outsider would make them (signed payloads shaped like Slack's):
each is refused, the attacker is told plainly and without learning what the request is, and
the audit records the refusal; no secret typed in a command reaches a channel or the audit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Literal

from blocks import ACTION_APPROVE, ACTION_EDIT
from bot import Agent, Tool
from bot.testing import FunctionModel
from state import AuditEntry

from .._local_slack import home_block_actions, payload_user
from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, DAVE, BotFactory, Harness
from .test_edit_approval import RAN, _values, editable_agent

NOT_YOURS = "This is not a request you can see, so you cannot answer it."
"""The whole refusal a person is shown, word for word, so the attacker learns nothing more."""

NOTICE_BLOCK = "hb-notice"
"""The block id of the notice on top of a Home view."""

PRIVATE = "C0PRIVATE"
"""A private channel (its id starts with C, as new private channels' do in Slack)."""
ROOT = Path(__file__).resolve().parents[2]


def _private(h: Harness, *members: str) -> None:
    h.slack.add_channel(PRIVATE, "ops-private", private=True, members=members)


async def _ask(h: Harness, channel: str, text: str = "deploy api to prod") -> tuple[str, str]:
    """(thread ts, interaction id) of the card ALICE's request posts in `channel`."""
    asked = await h.mention(ALICE, text, channel=channel)
    return asked.ts, h.interaction_id(h.card(asked.ts))


def _listed(view: dict[str, Any] | None) -> set[str]:
    assert view is not None, "no Home view was published"
    return {
        str(block["block_id"]).split("|")[1]
        for block in view["blocks"]
        if block["type"] == "actions"
    }


async def _open(h: Harness, user: str) -> set[str]:
    assert (await h.slack.open_home(user)).status == 200
    await h.bot.drain()
    return _listed(h.slack.home_view(user))


async def _refused(h: Harness, user: str) -> list[AuditEntry]:
    return [e for e in await h.store.recent_audit() if e.action == "refused" and e.user == user]


def _notice(h: Harness, user: str) -> str:
    view = h.slack.home_view(user) or {}
    return str([b for b in view.get("blocks", []) if b.get("block_id") == NOTICE_BLOCK])


async def test_home_lists_dm_and_private_channel_requests_only_for_who_can_see_them(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _private(h, ALICE, CAROL)
        h.slack.add_group_dm("C0TRIO", [ALICE, CAROL, DAVE])
        _, public = await _ask(h, CHANNEL)
        _, private = await _ask(h, PRIVATE)
        _, direct = await _ask(h, h.slack.dm_channel(ALICE))
        _, group = await _ask(h, "C0TRIO")

        # CAROL is in the private channel and the group DM; BOB, an approver, in neither.
        assert await _open(h, CAROL) == {public, private, group}
        assert await _open(h, BOB) == {public}
        assert await _open(h, DAVE) == set()

        # BOB forges a Home click on each hidden request (a control CAROL's view shows, and
        # one for the DM): refused, told only that it is not his, audited, nothing runs.
        for hidden in (private, direct):
            payload = home_block_actions(
                h.slack, CAROL, ACTION_APPROVE, value=None, selected=None, block_prefix="hb|"
            )
            action = payload["actions"][0]
            action["block_id"] = f"hb|{hidden}|{action['block_id'].split('|', 2)[2]}"
            payload["user"] = payload_user(h.slack, BOB)
            assert (await h.slack.send_interactivity(payload)).status == 200
            await h.bot.drain()
            stored = await h.store.get_interaction(hidden)
            assert stored is not None and stored.status == "pending"
            assert NOT_YOURS in _notice(h, BOB) and "deploy" not in _notice(h, BOB)
        assert agents.DEPLOYS == []
        assert [e.interaction_id for e in await _refused(h, BOB)] == [direct, private]


async def test_home_hides_a_private_channels_request_when_slack_cannot_say_who_is_in_it(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _private(h, ALICE, CAROL)
        await _ask(h, PRIVATE)
        h.slack.scopes.remove("groups:read")  # conversations.info/members now refused
        assert await _open(h, CAROL) == set()


async def test_forged_modal_submissions_get_the_checks_a_click_gets(make_bot: BotFactory) -> None:
    RAN.clear()  # the edit tests' agent keeps what ran at module level; earlier tests fill it
    async with make_bot(editable_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _private(h, ALICE, CAROL)
        asked = await h.mention(ALICE, "deploy api 2.3", channel=PRIVATE)
        card = h.card(asked.ts)
        iid = h.interaction_id(card)
        assert await h.click(CAROL, card.ts, ACTION_EDIT) == 200
        [view] = list(h.slack.views.values())

        # BOB, an approver who never saw the private channel, submits CAROL's edit form; then
        # an answer form (`hb:modal`) naming the same request.
        edit = h.slack.view_submission_payload(CAROL, view.id, _values(view, Version="6.6.6"))
        edit["user"] = payload_user(h.slack, BOB)
        answer = json.loads(json.dumps(edit))
        answer["view"]["callback_id"] = "hb:modal"
        # CAROL herself, but from another workspace.
        elsewhere = h.slack.view_submission_payload(CAROL, view.id, _values(view, Version="7"))
        elsewhere["team"]["id"] = elsewhere["user"]["team_id"] = "T0OTHER"
        for payload in (edit, answer, elsewhere):
            response = await h.slack.send_interactivity(payload)
            body = response.json()
            assert body["response_action"] == "errors"
            assert list(body["errors"].values()) == [NOT_YOURS]
        await h.bot.drain()

        stored = await h.store.get_interaction(iid)
        assert stored is not None and stored.status == "pending" and RAN == []
        assert [e.interaction_id for e in await _refused(h, BOB)] == [iid, iid]
        assert [e.interaction_id for e in await _refused(h, CAROL)] == [iid]


async def test_a_modal_answer_is_checked_again_when_it_is_claimed(make_bot: BotFactory) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        _private(h, ALICE, CAROL)
        asked, iid = await _ask(h, PRIVATE)
        # A recorded modal answer whose check before the ack it never had (or which no longer
        # holds): BOB cannot see the channel, so the claim refuses it.
        item = {"interaction_id": iid, "user": BOB, "answer": {"approved": True}}
        await h.store.enqueue("view", {**item, "teams": [h.slack.team_id]})
        await h.bot.drain()

        stored = await h.store.get_interaction(iid)
        assert stored is not None and stored.status == "pending" and agents.DEPLOYS == []
        [refusal] = await _refused(h, BOB)
        assert refusal.interaction_id == iid
        told = [e for e in h.slack.ephemerals_for(BOB)]
        assert [e.text for e in told] == [NOT_YOURS]
        assert "Approved" not in str(h.card(asked).blocks)


async def test_a_refusal_to_someone_who_cannot_see_the_request_names_nothing_of_it(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=CAROL) as h:
        _private(h, ALICE, BOB, CAROL)
        asked, iid = await _ask(h, PRIVATE)
        card = h.card(asked)
        # BOB is in the channel: he is told why. DAVE is not (his clicks are forged): he is
        # told only that it is not his, before and after CAROL's answer.
        forged = h.slack.block_actions_payload(DAVE, card.ts, ACTION_APPROVE)
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert (await h.slack.send_interactivity(forged)).status == 200
        await h.bot.drain()
        assert await h.click(CAROL, card.ts, ACTION_APPROVE) == 200
        # Slack refuses an ephemeral message to someone not in the channel: told in a DM.
        h.slack.fail_next("chat.postEphemeral", status=400)
        assert (await h.slack.send_interactivity(forged)).status == 200
        await h.bot.drain()

        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert "`deploy`" in h.ephemerals(BOB)[-1]
        assert h.ephemerals(DAVE) == [NOT_YOURS]
        dm = h.slack.bot_messages(channel=h.slack.dm_channel(DAVE))
        assert [m.text for m in dm] == [NOT_YOURS]
        refused = await _refused(h, DAVE)
        assert [e.interaction_id for e in refused] == [iid, iid]
        # The audit keeps the real reason, and says what the outsider was told.
        assert all(NOT_YOURS in str(e.detail) for e in refused)
        assert any("already answered" in str(e.detail) for e in refused)


RELEASED: list[str] = []
"""The tokens the release tool really received."""


def release(
    service: str, version: str, environment: Literal["staging", "prod"] = "staging", token: str = ""
) -> str:
    """Release a version of a service."""
    RELEASED.append(token)
    return f"Released {service} {version} to {environment}."


def _release_agent() -> Agent:
    def never(messages: list[dict[str, Any]]) -> Any:
        raise AssertionError("a command must not call the model")

    tool = Tool(release, name="deploy", requires_approval=True, command="/deploy")
    return Agent(name="releaser", model=FunctionModel(never), tools=[tool])


async def _raw_holders(h: Harness, store_url: str, secret: str) -> list[str]:
    """What in the store holds `secret`, read byte by byte: every Redis key under the store's
    prefix (any type), every SQLite row of every table. Named "run <id>", or the key / table."""
    found: set[str] = set()
    if store_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(store_url.removeprefix("sqlite:///"))
        try:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                for row in conn.execute(f"SELECT * FROM {table}"):
                    if secret in repr(row):
                        found.add(f"run {row[0]}" if table == "runs" else table)
        finally:
            conn.close()
        return sorted(found)
    import redis.asyncio as aioredis

    prefix = store_url.split("prefix=", 1)[1]
    client = aioredis.Redis.from_url(store_url.split("?", 1)[0])
    try:
        async for key in client.scan_iter(match=f"{prefix}*"):
            kind = (await client.type(key)).decode()
            value: object
            if kind == "string":
                value = await client.get(key)
            elif kind == "hash":
                value = await client.hgetall(key)
            elif kind == "list":
                value = await client.lrange(key, 0, -1)
            elif kind == "zset":
                value = await client.zrange(key, 0, -1)
            elif kind == "stream":
                value = await client.xrange(key)
            else:
                value = await client.smembers(key)
            if secret in repr(value):
                name = key.decode().removeprefix(prefix)
                found.add(f"run {name.removeprefix('run:')}" if name.startswith("run:") else name)
    finally:
        await client.aclose()
    return sorted(found)


def _handback(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot._cli", *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_secrets_typed_in_slash_commands_reach_no_channel_and_no_audit(
    make_bot: BotFactory, store_url: str
) -> None:
    RELEASED.clear()
    secrets = ["hunter2-slash", "hunter3-bad", "hunter4-unknown", "xoxb-1234567890-leaked"]
    async with make_bot(_release_agent(), HANDBACK_APPROVERS="S0OPS") as h:
        ran = await h.slack.run_command(
            ALICE, CHANNEL, "/deploy", "cmd8 1.0 staging token=hunter2-slash"
        )
        assert ran.status == 200
        # Text that does not make arguments, whose form Slack does not open: refused.
        h.slack.fail_next("views.open", status=400)
        bad = await h.slack.run_command(ALICE, CHANNEL, "/deploy", "cmd8 token=hunter3-bad extra x")
        unknown = await h.slack.run_command(ALICE, CHANNEL, "/nope", "token=hunter4-unknown")
        # A secret-shaped value under a name that is not secret-looking.
        shaped = await h.slack.run_command(
            ALICE, CHANNEL, "/deploy", "xoxb-1234567890-leaked 2.0 staging"
        )
        await h.bot.drain()
        assert [r.status for r in (bad, unknown, shaped)] == [200, 200, 200]
        said = h.ephemerals(ALICE)  # only whoever typed a command sees their text
        assert said[0].startswith("`environment`") and "not one of my commands" in said[1]

        [opening, _] = [m for m in h.slack.bot_messages() if m.thread_ts is None]
        assert opening.text == (
            f"<@{ALICE}> ran /deploy service=cmd8 version=1.0 environment=staging "
            "token='[redacted]'"
        )
        card = h.card(opening.ts)
        stored_card = await h.store.get_interaction(h.interaction_id(card))
        assert stored_card is not None
        card_run = stored_card.run_id
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert RELEASED == ["hunter2-slash"]  # the tool still gets the real value

        shown = json.dumps([[m.text, m.blocks] for m in h.slack.messages])
        assert not [s for s in secrets if s in shown]
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert len(refused) == 2 and all(e.user == ALICE for e in refused)
        run_id = await h.store.get_thread_run(CHANNEL, opening.ts)
        run = await h.store.load_run(run_id or "")
        assert run is not None
        prompts = [m for m in run.transcript if m.get("role") == "user"]
        assert prompts and not [s for s in secrets if s in json.dumps(prompts)]
        # The stored transcript (the thread's log the model reads later) and the run's input
        # keep the redacted form: the typed value was only in the call the tool was made with.
        assert "hunter2-slash" not in json.dumps(run.transcript)
        assert "hunter2-slash" not in json.dumps(run.input)
        # Nor any other stored byte: the paused run's call is redacted once the turn ended.
        assert await _raw_holders(h, store_url, "hunter2-slash") == []
        paused = await h.store.load_run(card_run)
        assert paused is not None and paused.resumed_by is not None

    audit = _handback("audit", "--store", store_url, "--json", "--limit", "1000")
    assert audit.returncode == 0, audit.stderr
    assert "/deploy" in audit.stdout
    assert not [s for s in secrets if s in audit.stdout]


async def test_a_card_click_from_outside_a_dm_or_private_channel_is_refused(
    make_bot: BotFactory,
) -> None:
    """A forged click on the card itself (not in Home) gets the same check as a Home click:
    BOB, an approver, is in neither ALICE's DM nor the private channel; his clicks are refused,
    he is told nothing of the request, the audit says so, and nothing runs. A member approves."""
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS="S0OPS") as h:
        h.slack.usergroups["S0OPS"] = [BOB, CAROL]
        _private(h, ALICE, CAROL)
        private_ts, private = await _ask(h, PRIVATE)
        direct_ts, direct = await _ask(h, h.slack.dm_channel(ALICE))
        for ts, iid, channel in (
            (private_ts, private, PRIVATE),
            (direct_ts, direct, h.slack.dm_channel(ALICE)),
        ):
            card = h.card(ts)
            assert await h.click(BOB, card.ts, ACTION_APPROVE, channel=channel) == 200
            stored = await h.store.get_interaction(iid)
            assert stored is not None and stored.status == "pending"
        assert agents.DEPLOYS == []
        assert [e.interaction_id for e in await _refused(h, BOB)] == [direct, private]
        told = [e.text for e in h.slack.ephemerals_for(BOB)] + [
            m.text for m in h.slack.bot_messages(channel=h.slack.dm_channel(BOB))
        ]
        assert told and all(NOT_YOURS in t and "deploy" not in t for t in told), told

        # CAROL, a member of the private channel and an approver, approves it: it runs once.
        assert await h.click(CAROL, h.card(private_ts).ts, ACTION_APPROVE, channel=PRIVATE) == 200
        assert len(agents.DEPLOYS) == 1
