"""The playground with the bundled example MCP server (`handback dev --example-mcp`, or
`handback dev examples/handback.toml`): the agent, and the offline model's script for it.

Without `OPENAI_API_KEY` the offline demo model answers; the chat-ops script knows only the
chat-ops tools, so for this agent it follows this one: `status`, `deploy api 2.4` (an approval
card) and `incident on web` (the server's question as a card).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from .._agent import Agent
from ..mcp import MCPServer
from ..testing import ScriptReply
from .example_mcp import LOG_VARIABLE, MODULE

__all__ = ["EXAMPLE_PROMPTS", "example_agent", "example_reply", "is_example"]

SERVER = "example"
"""The server's name in the agent: its tools are `example_status`, `example_deploy`, ..."""

EXAMPLE_PROMPTS = ("status", "deploy api 2.4", "incident on web")
"""Messages to try, shown on the playground page."""

_SERVICES = ("api", "web", "worker")
_VERSION = re.compile(r"\b(\d+(?:\.\d+)+)\b")


def example_agent(model: str = "openai/gpt-4.1-mini") -> Agent:
    """The agent `--example-mcp` runs: the example server over stdio, started with this very
    interpreter, its annotations trusted (`status` runs ungated, `deploy` is gated) and
    `incident` ungated (its question is the person's step). `$HANDBACK_EXAMPLE_LOG` is passed
    on to the server, which logs its calls there."""
    # The server gets only the SDK's safe environment and what is named here.
    log = os.environ.get(LOG_VARIABLE)
    server = MCPServer.stdio(
        SERVER,
        [sys.executable, "-m", MODULE],
        env={LOG_VARIABLE: log} if log else None,
        trust_annotations=True,
        approvals={"incident": False},
    )
    return Agent(
        name="example",
        model=model,
        tools=[server],
        system_prompt="You operate a small service fleet through the example MCP server.",
    )


def is_example(agent: Agent) -> bool:
    """Whether `agent` runs the example server (from `example_agent` or a config file that
    starts `python -m bot.playground.example_mcp`): the offline model then plays its script."""
    return any(
        isinstance(toolset, MCPServer) and list(toolset.command[-2:]) == ["-m", MODULE]
        for toolset in agent.toolsets
    )


def example_reply(messages: Sequence[dict[str, Any]]) -> ScriptReply:
    """The offline model's next turn for the example agent: one tool call per request, then
    the tool's result said back."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"The example server said: {last.get('content')}"
    text = str(last.get("content") or "").lower()
    service = next((s for s in _SERVICES if s in text), None)
    if "deploy" in text:
        version = _VERSION.search(text)
        arguments = {"service": service or "api", "version": version.group(1) if version else "2.4"}
        return [{"name": f"{SERVER}_deploy", "arguments": arguments}]
    if "incident" in text:
        return [{"name": f"{SERVER}_incident", "arguments": {"service": service or "api"}}]
    if "status" in text or "version" in text:
        arguments = {"service": service} if service else {}
        return [{"name": f"{SERVER}_status", "arguments": arguments}]
    tries = ", ".join(f"`{prompt}`" for prompt in EXAMPLE_PROMPTS)
    return f"I am the offline demo model for the example MCP server. Try {tries}."
