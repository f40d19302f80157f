"""An agent with the older-protocol test server (`tests/mcp/legacy_server.py`, whose tools ask
during the call), served by real `handback run` processes; the server's files come from the
environment (`${OPS_LOG}`, `${OPS_PID}`, `${LEGACY_DONE}`, read when the bot starts it)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bot import Agent
from bot.mcp import Backoff, MCPServer
from bot.testing import FunctionModel

LEGACY_SERVER = str(Path(__file__).parent.parent / "mcp" / "legacy_server.py")


def _respond(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    text = str(last["content"])
    if "login" in text:
        return [{"name": "legacy_login", "arguments": {"url": text.split()[-1]}}]
    if "scale" in text:
        return [{"name": "legacy_scale", "arguments": {"service": "api"}}]
    return [{"name": "legacy_pick", "arguments": {}}]


legacy = MCPServer.stdio(
    "legacy",
    [sys.executable, LEGACY_SERVER],
    env={"OPS_LOG": "${OPS_LOG}", "OPS_PID": "${OPS_PID}", "LEGACY_DONE": "${LEGACY_DONE}"},
    approvals={"*": False},
    backoff=Backoff(first=0.1, most=1.0),
)

agent = Agent(name="legacy", model=FunctionModel(_respond), tools=[legacy])
