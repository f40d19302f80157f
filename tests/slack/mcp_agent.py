"""An agent with the tests' MCP server, served by real `handback run` processes; the server's
files come from the environment (`${OPS_LOG}`, read when the bot starts it); its requestState
key is fixed, so the server a restarted bot starts reads what the first one sealed."""

from __future__ import annotations

import sys
from typing import Any

from bot import Agent
from bot.mcp import Backoff, MCPServer
from bot.testing import FunctionModel

from ..mcp.conftest import OPS_SERVER


def _respond(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    if "hang" in str(last["content"]):
        return [{"name": "ops_hang", "arguments": {}}]
    if "scale" in str(last["content"]):
        return [{"name": "ops_scale", "arguments": {"service": "api"}}]
    return [{"name": "ops_deploy", "arguments": {"service": "api", "version": "2.4"}}]


ops = MCPServer.stdio(
    "ops",
    [sys.executable, OPS_SERVER, "stdio"],
    env={"OPS_LOG": "${OPS_LOG}", "OPS_PID": "${OPS_PID}", "OPS_STATE_KEY": "0123456789abcdef" * 4},
    trust_annotations=True,
    approvals={"hang": False, "scale": False},
    backoff=Backoff(first=0.1, most=1.0),
)

agent = Agent(name="ops", model=FunctionModel(_respond), tools=[ops])
