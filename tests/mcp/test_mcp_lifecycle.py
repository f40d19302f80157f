"""An MCP server's life under the agent: killed mid-call, restarted with backoff, down when
called, its tool list changed, closed on shutdown; secrets from the environment never logged."""

from __future__ import annotations

import asyncio
import logging
import os
import time

import pytest

from bot import Agent
from bot.mcp import MCPServer, MCPTool
from bot.testing import FunctionModel

from .conftest import Ops, until

pytestmark = pytest.mark.slow


def _tool(server: MCPServer, name: str) -> MCPTool:
    [tool] = [t for t in server.tools() if t.name == name]
    return tool


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too: reap it if it is our child
        return os.waitpid(pid, os.WNOHANG) == (0, 0)
    except ChildProcessError:
        return True


async def test_a_server_killed_mid_call_is_reported_interrupted_then_restarted(
    ops: Ops, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="handback.mcp")
    # A loaded machine takes seconds to start a Python MCP server: wait for the restart.
    async with ops.stdio(approvals={"*": False}, connect_timeout=60.0) as server:
        first = int(ops.pid.read_text())
        call = asyncio.create_task(_tool(server, "ops_hang").invoke({}))
        await until(lambda: ops.calls("hang"))
        ops.kill()
        result = await asyncio.wait_for(call, 30)
        assert result == (
            "Interrupted: the ops server stopped while `hang` ran; "
            "it may or may not have taken effect."
        )
        assert await _tool(server, "ops_status").invoke({"service": "api"}) == (
            "api is <b>healthy</b> & running"
        )
        assert server.restarts == 1 and int(ops.pid.read_text()) != first
    assert "MCP server ops is down; starting it again" in caplog.text


async def test_a_call_while_the_server_cannot_start_is_certainly_not_run(ops: Ops) -> None:
    async with ops.stdio(approvals={"*": False}, connect_timeout=1.0) as server:
        status = _tool(server, "ops_status")
        ops.refuse.touch()
        ops.kill()
        await until(lambda: not server.reachable)
        began = time.monotonic()
        result = await status.invoke({"service": "api"})
        assert result == "Error: the ops server is not reachable; `status` was certainly not run."
        assert time.monotonic() - began < 10  # bounded by connect_timeout, never a hung turn
        assert ops.calls("status") == []
        ops.refuse.unlink()
        server.connect_timeout = 60.0
        assert await status.invoke({"service": "api"}) == "api is <b>healthy</b> & running"


async def test_the_tool_list_is_read_again_when_the_server_says_it_changed(ops: Ops) -> None:
    async with ops.stdio(approvals={"*": False}) as server:
        agent = Agent(name="ops", model=FunctionModel(lambda _: "ok"), tools=[server])
        assert "ops_extra" not in agent.tools
        assert await _tool(server, "ops_grow").invoke({}) == "grown"
        await until(lambda: "ops_extra" in agent.tools)
        assert await agent.tools["ops_extra"].invoke({}) == "extra"


async def test_closing_ends_the_server_within_the_grace_even_with_a_call_open(ops: Ops) -> None:
    server = ops.stdio(approvals={"*": False}, close_timeout=5.0)
    await server.open()
    pid = int(ops.pid.read_text())
    call = asyncio.create_task(_tool(server, "ops_hang").invoke({}))
    await until(lambda: ops.calls("hang"))
    began = time.monotonic()
    await server.aclose()
    assert time.monotonic() - began < 8
    assert (await asyncio.wait_for(call, 10)).startswith("Interrupted:")
    await until(lambda: not _alive(pid))
    assert server.tools() == []
    with pytest.raises(Exception, match="was closed"):
        await server.open()


async def test_a_secret_from_the_environment_never_reaches_the_log(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKETS_TOKEN", "s3cr3t-value-for-test")
    caplog.set_level(logging.DEBUG)
    server = MCPServer.http(
        "tickets",
        "http://127.0.0.1:9/mcp",
        headers={"Authorization": "Bearer ${TICKETS_TOKEN}"},
        start_timeout=5.0,
    )
    async with server:
        assert server.tools() == [] and not server.reachable
    assert "MCP server tickets is down" in caplog.text
    assert "s3cr3t-value-for-test" not in caplog.text  # not even in the SDK's DEBUG lines


async def test_a_secret_in_the_url_is_masked_in_handbacks_own_lines(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKETS_KEY", "s3cr3t-key-for-test")
    caplog.set_level(logging.INFO, logger="handback.mcp")
    server = MCPServer.http(
        "tickets", "http://127.0.0.1:9/mcp?key=${TICKETS_KEY}", start_timeout=5.0
    )
    async with server:
        result = await server._call("list", {})
    assert result.startswith("Error: the tickets server is not reachable")
    ours = [r.getMessage() for r in caplog.records if r.name == "handback.mcp"]
    assert ours and not any("s3cr3t-key-for-test" in line for line in ours)


async def test_read_only_tools_of_a_trusted_server_and_declared_ones_may_run_again(
    ops: Ops,
) -> None:
    async with ops.stdio(trust_annotations=True, idempotent=["restart"]) as server:
        again = {t.name for t in server.tools() if t.idempotent}
    assert again == {"ops_status", "ops_grow", "ops_restart"}
    async with ops.stdio() as server:
        assert not any(t.idempotent for t in server.tools())
