"""An MCP server asks for input mid-call (form elicitation on the current protocol: an
input-required result): the question is an interaction of the run, stored with the call, the
answer is checked against the server's schema, and the retry is sent once from the stored
round, across a kill -9 of the bot too."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot import Agent, InvalidResumeValue, RunAlreadyResumed
from bot.mcp import MCPServer
from bot.testing import FunctionModel
from state import Store, open_store

from ..runtime.conftest import events_of, script
from .conftest import Ops, ops_in
from .elicit_agent import agent as elicit_agent
from .elicit_agent import server_in

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'handback.db'}") as opened:
        yield opened


def _agent(store: Store, server: MCPServer) -> Agent:
    calls = {"name": "ops_scale", "arguments": {"service": "api"}}
    return Agent(name="ops", model=FunctionModel(script(calls)), tools=[server], store=store)


def _accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


def _rounds(ops: Ops) -> list[dict[str, Any]]:
    return [c["arguments"] for c in ops.calls("scale")]


async def test_the_question_is_an_interaction_and_the_answer_reaches_the_server_once(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(approvals={"scale": False}) as server:
        agent = _agent(store, server)
        run = agent("scale api")
        [asked], output, _ = await events_of(run)
        assert output.status.reason == "input_required"
        assert asked.kind == "elicitation"
        assert asked.payload["message"] == "How many replicas of api?"
        assert asked.payload["schema"]["required"] == ["replicas"]
        [first] = _rounds(ops)
        assert first["state"] is None
        stored = await store.load_run(run.run_id)
        assert stored is not None
        [held] = stored.input_required.values()
        assert held["inputRequests"]["replicas"]["params"]["message"] == asked.payload["message"]

        with pytest.raises(InvalidResumeValue):  # 11 is past the schema's maximum
            await events_of(
                agent(parent_id=run.run_id, resume={asked.interaction_id: _accept(replicas=11)})
            )
        assert len(_rounds(ops)) == 1

        again = agent(parent_id=run.run_id, resume={asked.interaction_id: _accept(replicas=3)})
        pending, output, _ = await events_of(again)
    assert pending == [] and output.output == "done: scaled api to 3"
    [_, retry] = _rounds(ops)
    assert retry["state"].startswith("r1:")
    assert retry["responses"] == {"replicas": {"action": "accept", "content": {"replicas": 3}}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server_as_such(
    ops: Ops, store: Store, action: str
) -> None:
    async with ops.stdio(approvals={"scale": False}) as server:
        agent = _agent(store, server)
        run = agent("scale api")
        [asked], _, _ = await events_of(run)
        again = agent(parent_id=run.run_id, resume={asked.interaction_id: {"action": action}})
        _, output, _ = await events_of(again)
    assert output.output == f"done: scale of api: {action}"
    assert _rounds(ops)[-1]["responses"] == {"replicas": {"action": action}}


async def test_a_second_round_is_a_new_question_and_ends_with_one_retry_each(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(approvals={"scale": False}) as server:
        agent = _agent(store, server)
        run = agent("scale api")
        [first], _, _ = await events_of(run)
        second_run = agent(parent_id=run.run_id, resume={first.interaction_id: _accept(replicas=8)})
        [second], output, _ = await events_of(second_run)
        assert output.status.reason == "input_required"
        assert second.interaction_id != first.interaction_id
        assert second.payload["message"] == "8 replicas is a lot. Sure?"
        assert second.response_schema is not None
        last = agent(
            parent_id=second_run.run_id, resume={second.interaction_id: _accept(sure="yes")}
        )
        _, output, _ = await events_of(last)
    assert output.output == "done: scaled api to 8 (sure: yes)"
    states = [r["state"] for r in _rounds(ops)]
    assert len(states) == 3 and states[0] is None
    assert states[1].startswith("r1:") and states[2] == "r2:8"


async def test_a_state_the_restarted_server_refuses_ends_the_call_with_a_clear_result(
    ops: Ops, store: Store
) -> None:
    # No shared key: the server seals with a key of its process, lost when it restarts.
    async with ops.stdio(approvals={"scale": False}) as server:
        run = _agent(store, server)("scale api")
        [asked], _, _ = await events_of(run)
    async with ops.stdio(approvals={"scale": False}) as restarted:
        again = _agent(store, restarted)(
            parent_id=run.run_id, resume={asked.interaction_id: _accept(replicas=2)}
        )
        _, output, _ = await events_of(again)
    assert "could not continue `scale` after a restart" in str(output.output)
    assert "nothing was retried" in str(output.output)
    assert len(_rounds(ops)) == 1  # the refused round never reached the tool


async def test_killed_after_the_question_the_restarted_bot_sends_one_retry_with_the_state(
    store_url: str, tmp_path: Path
) -> None:
    env = {**os.environ, "HANDBACK_STORE": store_url, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "tests.mcp.elicit_agent", "elicit-kill", str(tmp_path)],
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 90)).decode().split()
        if not line or line[0] != "PAUSED":
            await process.wait()
            pytest.fail((await process.stderr.read()).decode())
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL
    iid = line[1]
    ops = ops_in(tmp_path)
    [first] = _rounds(ops)

    async with open_store(store_url) as store, server_in(tmp_path) as server:
        agent = elicit_agent(store, server)
        again = agent(parent_id="elicit-kill", resume={iid: _accept(replicas=4)})
        _, output, _ = await events_of(again)
        assert output.output == "done: scaled api to 4"
        # Resumed again (a retry of the same resume): the stored result, no second retry.
        with pytest.raises(RunAlreadyResumed):
            await events_of(agent(parent_id="elicit-kill", resume={iid: _accept(replicas=5)}))
    rounds = _rounds(ops)
    assert len(rounds) == 2 and first["state"] is None
    assert rounds[1]["state"].startswith("r1:")
    assert rounds[1]["responses"] == {"replicas": {"action": "accept", "content": {"replicas": 4}}}


async def test_a_server_using_the_sdks_elicit_resolver_is_asked_once_and_answered(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(approvals={"maintain": False}) as server:
        call = {"name": "ops_maintain", "arguments": {"service": "db"}}
        agent = Agent(name="ops", model=FunctionModel(script(call)), tools=[server], store=store)
        run = agent("maintain db")
        [asked], _, _ = await events_of(run)
        assert asked.payload["message"] == "How long may db be down (minutes)?"
        assert ops.calls("maintain") == []  # the resolver asks before the tool body runs
        again = agent(parent_id=run.run_id, resume={asked.interaction_id: _accept(minutes=30)})
        _, output, _ = await events_of(again)
    assert output.output == "done: db down for 30 min"
    assert ops.calls("maintain") == [
        {"tool": "maintain", "arguments": {"service": "db", "action": "accept"}}
    ]


async def test_a_form_that_is_no_json_schema_ends_the_call_with_a_clear_result(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(approvals={"odd": False}) as server:
        call = {"name": "ops_odd", "arguments": {}}
        agent = Agent(name="ops", model=FunctionModel(script(call)), tools=[server], store=store)
        pending, output, _ = await events_of(agent("odd"))
    assert pending == []
    assert "asked for input for `odd` in a form that cannot be shown" in str(output.output)
    assert len(ops.calls("odd")) == 1
