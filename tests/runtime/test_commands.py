"""A tool run directly as a person's command (`Agent.call_tool`): the same gate, no model."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent, Tool, UsageError
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
