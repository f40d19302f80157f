"""An MCP server's tools behind the approval gate: gated by default, read-only ungated only
from a server trusted for its annotations, nothing sent to the server before approval."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot import Agent, Approval, UsageError
from bot.mcp import MCPServer
from bot.testing import FunctionModel
from state import Store, open_store

from ..runtime.conftest import events_of, script
from .conftest import Ops

pytestmark = pytest.mark.slow


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'handback.db'}") as opened:
        yield opened


def _agent(store: Store, server: MCPServer, *calls: dict[str, Any]) -> Agent:
    return Agent(name="ops", model=FunctionModel(script(*calls)), tools=[server], store=store)


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def test_tools_are_offered_with_the_server_prefix_and_the_allow_list(ops: Ops) -> None:
    async with ops.stdio(tools=["st*", "deploy"]) as server:
        assert sorted(t.name for t in server.tools()) == ["ops_deploy", "ops_status"]
    async with ops.stdio(prefix="", tools=["status"]) as server:
        assert [t.name for t in server.tools()] == ["status"]
    assert server.tools() == []


async def test_without_trust_every_tool_waits_for_approval_and_the_server_is_not_called(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio() as server:
        agent = _agent(store, server, _call("ops_status", service="api"))
        pending, output, _ = await events_of(agent("how is api?"))
    assert output.status.code == "cancelled" and len(pending) == 1
    [asked] = pending
    assert asked.kind == "approval"
    assert asked.payload["server"] == "ops" and asked.payload["server_tool"] == "status"
    assert asked.payload["gated_because"] == "server not trusted for annotations"
    assert ops.calls() == []


@pytest.mark.parametrize(
    ("tool", "arguments", "why"),
    [
        ("deploy", {"service": "api", "version": "2.4"}, "destructive"),
        ("restart", {"service": "api"}, "no annotations"),
        ("fail", {"reason": "x"}, "not read-only"),
    ],
)
async def test_with_trust_only_read_only_runs_ungated(
    ops: Ops, store: Store, tool: str, arguments: dict[str, Any], why: str
) -> None:
    async with ops.stdio(trust_annotations=True) as server:
        agent = _agent(
            store, server, _call("ops_status", service="api"), _call(f"ops_{tool}", **arguments)
        )
        pending, _, _ = await events_of(agent("status, then act"))
    assert [c["tool"] for c in ops.calls()] == ["status"]
    [waiting] = pending
    assert waiting.payload["gated_because"] == why
    assert waiting.payload["tool"] == f"ops_{tool}"


async def test_an_approved_call_reaches_the_server_once_and_a_denied_one_never(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(trust_annotations=True) as server:
        agent = _agent(store, server, _call("ops_deploy", service="api", version="2.4"))
        run = agent("deploy")
        [asked], _, _ = await events_of(run)
        assert ops.calls() == []
        _, done, _ = await events_of(
            agent(parent_id=run.run_id, resume={asked.interaction_id: True})
        )
        assert done.status.code == "success" and done.output == "done: deployed api 2.4"
        assert ops.calls() == [
            {"tool": "deploy", "arguments": {"service": "api", "version": "2.4"}}
        ]

        again = agent("deploy")
        [asked], _, _ = await events_of(again)
        denial = {"approved": False, "reason": "change freeze"}
        _, denied, _ = await events_of(
            agent(parent_id=again.run_id, resume={asked.interaction_id: denial})
        )
    assert denied.output == "done: Denied: change freeze"
    assert len(ops.calls("deploy")) == 1


async def test_approvals_override_the_default_per_tool_with_globs(ops: Ops, store: Store) -> None:
    rule = Approval(approvers=["S0LEADS"])
    async with ops.stdio(approvals={"restart": False, "dep*": rule}) as server:
        tools = {t.name: t for t in server.tools()}
        agent = _agent(
            store,
            server,
            _call("ops_restart", service="api"),
            _call("ops_deploy", service="api", version="1"),
        )
        [asked], _, _ = await events_of(agent("restart and deploy"))
    assert tools["ops_restart"].requires_approval is False
    assert tools["ops_status"].requires_approval is True
    assert ops.calls() == [{"tool": "restart", "arguments": {"service": "api"}}]
    assert asked.payload["rule"]["approvers"] == ["S0LEADS"]


async def test_arguments_the_schema_refuses_never_reach_the_server(ops: Ops, store: Store) -> None:
    async with ops.stdio(approvals={"*": False}) as server:
        agent = _agent(store, server, _call("ops_deploy", service="api"))
        _, output, _ = await events_of(agent("deploy"))
    assert "invalid arguments" in output.output and "version" in output.output
    assert ops.calls() == []


async def test_a_tool_error_and_untrusted_text_reach_the_model_as_results(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(approvals={"*": False}) as server:
        agent = _agent(
            store, server, _call("ops_fail", reason="disk full"), _call("ops_status", service="db")
        )
        _, output, _ = await events_of(agent("try"))
    failed, status = output.output.removeprefix("done: ").split(" | ")
    assert failed.startswith("Error: tool `fail` of the ops server reported an error")
    assert status == "db is <b>healthy</b> & running"


async def test_environment_variables_are_read_at_start_and_a_missing_one_is_named(
    ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_LOG_FOR_TEST", str(ops.log))
    server = ops.stdio(env={**ops.env(), "OPS_LOG": "${OPS_LOG_FOR_TEST}"}, approvals={"*": False})
    async with server:
        assert "OPS_LOG_FOR_TEST" not in repr(server) and str(ops.log) not in repr(server)
        [status] = [t for t in server.tools() if t.name == "ops_status"]
        assert await status.invoke({"service": "api"}) == "api is <b>healthy</b> & running"
    assert ops.calls("status")
    with pytest.raises(UsageError, match="`NOT_SET_ANYWHERE`"):
        async with ops.stdio(env={"OPS_LOG": "${NOT_SET_ANYWHERE}"}):
            pass


def test_a_server_that_would_run_everything_unapproved_is_refused() -> None:
    with pytest.raises(UsageError, match="approval=False"):
        MCPServer.stdio("ops", ["true"], approval=False)
    with pytest.raises(UsageError, match="either a command or a url"):
        MCPServer("ops")
    with pytest.raises(UsageError, match="name"):
        MCPServer.stdio("ops server", ["true"])


async def test_a_server_over_streamable_http_is_gated_alike(
    ops: Ops, ops_http: str, store: Store
) -> None:
    async with MCPServer.http("ops", ops_http, trust_annotations=True) as server:
        agent = _agent(
            store,
            server,
            _call("ops_status", service="api"),
            _call("ops_deploy", service="api", version="3"),
        )
        run = agent("go")
        [asked], _, _ = await events_of(run)
        assert [c["tool"] for c in ops.calls()] == ["status"]
        _, done, _ = await events_of(
            agent(parent_id=run.run_id, resume={asked.interaction_id: True})
        )
    assert done.output == "done: api is <b>healthy</b> & running | deployed api 3"
    assert [c["tool"] for c in ops.calls()] == ["status", "deploy"]


async def test_redacted_arguments_are_hidden_on_the_card_but_sent_to_the_server(
    ops: Ops, store: Store
) -> None:
    async with ops.stdio(redact=["version"], trust_annotations=True) as server:
        agent = _agent(store, server, _call("ops_deploy", service="api", version="s3cr3t-2.4"))
        run = agent("deploy")
        [asked], _, _ = await events_of(run)
        assert asked.payload["arguments"] == {"service": "api", "version": "[redacted]"}
        assert "s3cr3t-2.4" not in str(asked.payload)
        await events_of(agent(parent_id=run.run_id, resume={asked.interaction_id: True}))
    assert ops.calls("deploy")[0]["arguments"]["version"] == "s3cr3t-2.4"
