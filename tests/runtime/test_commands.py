"""A tool run directly as a person's command (`Agent.call_tool`): the same gate, no model."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent, RunAlreadyResumed, Tool, UsageError
from bot.testing import FunctionModel
from state import Store

from .conftest import events_of


def _never(messages: list[dict[str, Any]]) -> Any:
    raise AssertionError("a command must not call the model")


def _agent(store: Store, ran: list[dict[str, Any]], fn: Any = _never) -> Agent:
    def deploy(service: str, version: str, environment: str = "staging") -> str:
        ran.append({"service": service, "version": version, "environment": environment})
        return f"deployed {service} {version} to {environment}"

    tool = Tool(deploy, requires_approval=True, command="/deploy")
    return Agent(name="ops", model=FunctionModel(fn), tools=[tool], store=store)


async def test_a_command_goes_through_the_gate_without_the_model(store: Store) -> None:
    ran: list[dict[str, Any]] = []
    agent = _agent(store, ran)
    assert list(agent.commands) == ["/deploy"]
    run = agent.call_tool(
        "deploy", {"service": "api", "version": "2.3"}, text="/deploy api 2.3", run_id="cmd-1"
    )
    (p,), out, _ = await events_of(run)
    assert p.kind == "approval" and p.runnable_path == "ops.deploy" and ran == []
    assert p.payload["arguments"] == {"service": "api", "version": "2.3", "environment": "staging"}
    (again,), _, _ = await events_of(
        agent.call_tool("deploy", {"service": "api", "version": "2.3"}, run_id="cmd-1")
    )
    assert again.interaction_id == p.interaction_id  # a retry replays the same card
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert result.status.code == "success" and result.output == "deployed api 2.3 to staging"
    assert ran == [{"service": "api", "version": "2.3", "environment": "staging"}]


async def test_a_denied_command_and_a_conversation_after_it(store: Store) -> None:
    ran: list[dict[str, Any]] = []
    agent = _agent(store, ran, lambda messages: f"seen {len(messages)} messages")
    run = agent.call_tool("deploy", {"service": "api", "version": "2.3"}, text="/deploy api 2.3")
    (p,), out, _ = await events_of(run)
    deny = {"approved": False, "reason": "freeze"}
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: deny}).collect()
    assert result.output == "Denied: freeze" and ran == []
    follow = await agent(prompt="why?", parent_id=result.run_id).collect()
    assert follow.output == "seen 4 messages"  # user, call, result, user


async def test_a_command_for_an_unknown_tool_is_a_usage_error(store: Store) -> None:
    agent = _agent(store, [])
    with pytest.raises(UsageError, match="no tool `nope`"):
        agent.call_tool("nope", {})


@pytest.mark.parametrize("command", ["deploy", "/Deploy", "/de ploy", "/" + "x" * 32, "/"])
def test_a_command_must_be_one_slack_takes(command: str) -> None:
    with pytest.raises(UsageError, match="command"):
        Tool(lambda: "x", name="x", command=command)


def test_two_tools_cannot_share_a_command() -> None:
    one = Tool(lambda: "1", name="one", command="/go")
    two = Tool(lambda: "2", name="two", command="/go")
    with pytest.raises(UsageError, match="two tools for `/go`"):
        Agent(name="a", model=FunctionModel(_never), tools=[one, two])


def _release_agent(store: Store, got: list[str]) -> Agent:
    def release(service: str, token: str = "") -> str:
        got.append(token)
        return f"released {service}"

    tool = Tool(release, requires_approval=True, command="/release")
    return Agent(name="ops", model=FunctionModel(lambda m: "ok"), tools=[tool], store=store)


async def _stored_calls(store: Store, run_id: str) -> str:
    run = await store.load_run(run_id)
    assert run is not None
    return " ".join(call.arguments for call in run.pending_calls)


async def test_a_resume_that_wins_the_claim_over_a_new_message_gets_the_typed_value(
    store: Store,
) -> None:
    got: list[str] = []
    agent = _release_agent(store, got)
    run = agent.call_tool("release", {"service": "api", "token": "hunter5-won"}, text="/release")
    (p,), out, _ = await events_of(run)
    # The approval's resume claims the paused run (as `answer_and_claim` does) before the new
    # message's run tries: that run loses, and must not take the value the resume needs.
    assert (await store.claim_run(out.run_id, child_id="resume-1")).won
    with pytest.raises(RunAlreadyResumed):
        await agent(prompt="never mind", parent_id=out.run_id).collect()
    assert "hunter5-won" in await _stored_calls(store, out.run_id)
    resumed = agent(parent_id=out.run_id, resume={p.interaction_id: True}, run_id="resume-1")
    assert (await resumed.collect()).status.code == "success"
    assert got == ["hunter5-won"]
    assert "hunter5-won" not in await _stored_calls(store, out.run_id)


async def test_a_new_message_that_wins_the_claim_scrubs_the_typed_value_at_once(
    store: Store,
) -> None:
    got: list[str] = []
    ask_again = Tool(lambda: "x", name="ask", requires_approval=True)
    agent = _release_agent(store, got)
    agent = Agent(
        name="ops",
        model=FunctionModel(lambda m: [{"name": "ask", "arguments": {}}]),
        tools=[*agent.tools.values(), ask_again],
        store=store,
    )
    run = agent.call_tool("release", {"service": "api", "token": "hunter6-moved"}, text="/release")
    (p,), out, _ = await events_of(run)
    # The new message's run claims it, then pauses itself (on another card) and never ends:
    # the superseded call's typed value is gone already.
    (again,), moved, _ = await events_of(agent(prompt="do something else", parent_id=out.run_id))
    assert again.interaction_id != p.interaction_id
    stored = await store.load_run(moved.run_id)
    assert stored is not None and stored.status == "paused"
    assert "hunter6-moved" not in await _stored_calls(store, out.run_id)
    with pytest.raises(RunAlreadyResumed):
        await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert got == []
