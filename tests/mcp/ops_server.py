"""A real MCP server for the tests, written with the SDK's server API: `python ops_server.py
stdio` or `python ops_server.py http PORT`. Each call it runs appends a line to `$OPS_LOG`, so
tests count calls on the server's side; it writes its pid to `$OPS_PID` when it starts and
refuses to start while `$OPS_REFUSE` names a file that exists."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("ops")


def _record(tool: str, arguments: dict[str, object]) -> None:
    with Path(os.environ["OPS_LOG"]).open("a") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def status(service: str) -> str:
    """The state of a service."""
    _record("status", {"service": service})
    return f"{service} is <b>healthy</b> & running"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def deploy(service: str, version: str) -> str:
    """Deploy a version of a service."""
    _record("deploy", {"service": service, "version": version})
    return f"deployed {service} {version}"


@server.tool()
def restart(service: str) -> str:
    """Restart a service (no annotations)."""
    _record("restart", {"service": service})
    return f"restarted {service}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def fail(reason: str) -> str:
    """A tool that reports an error."""
    _record("fail", {"reason": reason})
    raise ValueError(f"it failed: {reason}")


@server.tool()
async def hang(ctx: Context) -> str:
    """Never answers (until the process dies)."""
    _record("hang", {})
    await asyncio.Event().wait()
    return "never"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def grow(ctx: Context) -> str:
    """Adds the tool `extra` and says the tool list changed."""
    _record("grow", {})

    def extra() -> str:
        """A tool added while the server runs."""
        return "extra"

    server.add_tool(extra, annotations=ToolAnnotations(read_only_hint=True))
    await ctx.notify_tools_changed()
    return "grown"


class Confirm(BaseModel):
    ok: bool


@server.tool()
async def ask(ctx: Context) -> str:
    """Asks the user to confirm before it does anything (elicitation)."""
    answer = await ctx.elicit("Really?", Confirm)
    _record("ask", {"action": answer.action})
    return f"answer: {answer.action}"


def main() -> None:
    refuse = os.environ.get("OPS_REFUSE")
    if refuse and Path(refuse).exists():
        sys.exit(3)
    if pid_file := os.environ.get("OPS_PID"):
        Path(pid_file).write_text(str(os.getpid()))
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))


if __name__ == "__main__":
    main()
