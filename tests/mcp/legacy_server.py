"""A real MCP server on the older protocol (2025-11-25, the initialize handshake), written with
the SDK's server API: its tools ask during the call with `ctx.elicit(...)` and
`ctx.elicit_url(...)` (an `elicitation/create` request the client answers while the call is
open). `python legacy_server.py` over stdio. Each call appends a JSON line to `$OPS_LOG` (also
what it was answered) and the pid goes to `$OPS_PID`; `login` sends
`notifications/elicitation/complete` once the file `$LEGACY_DONE` exists (the person finished
at the URL); with `$LEGACY_GATE`, `pick` asks only once that file exists, and with
`$LEGACY_STUBBORN` it asks even when its call was cancelled meanwhile (as a question that
crossed the cancel on the wire would arrive)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from pydantic import BaseModel

server = MCPServer("legacy")


def _record(tool: str, **what: object) -> None:
    with Path(os.environ["OPS_LOG"]).open("a") as log:
        log.write(json.dumps({"tool": tool, **what}) + "\n")


class Region(BaseModel):
    region: Literal["eu", "us", "ap"]


class Scale(BaseModel):
    replicas: int
    reason: str


@server.tool()
async def pick(ctx: Context) -> str:
    """Ask which region, during the call."""
    _record("pick", phase="asking")
    with anyio.CancelScope(shield=bool(os.environ.get("LEGACY_STUBBORN"))):
        gate = os.environ.get("LEGACY_GATE")
        while gate and not await anyio.Path(gate).exists():  # noqa: ASYNC110 (another process)
            await anyio.sleep(0.05)
        try:
            answer = await ctx.elicit("Which region? <!channel>", Region)
        except Exception as exc:
            _record("pick", phase="refused", error=str(exc))
            raise
    data = answer.data.model_dump() if answer.action == "accept" else None
    _record("pick", phase="answered", action=answer.action, data=data)
    return f"picked {answer.action} {data}"


@server.tool()
async def scale(service: str, ctx: Context) -> str:
    """Ask how many replicas, during the call (two fields: a modal)."""
    _record("scale", phase="asking")
    answer = await ctx.elicit(f"How many replicas of {service}?", Scale)
    data = answer.data.model_dump() if answer.action == "accept" else None
    _record("scale", phase="answered", action=answer.action, data=data)
    return f"scale of {service}: {answer.action} {data}"


@server.tool()
async def login(url: str, ctx: Context) -> str:
    """Send the person to a URL; say it is complete once they finished there."""
    _record("login", phase="asking")
    done = Path(os.environ.get("LEGACY_DONE", "/nonexistent/legacy-done"))

    async def finished() -> None:
        while not await anyio.Path(done).exists():  # noqa: ASYNC110 (another process makes it)
            await anyio.sleep(0.05)
        await ctx.session.send_elicit_complete("el-1", related_request_id=ctx.request_id)

    async with anyio.create_task_group() as group:
        group.start_soon(finished)
        answer = await ctx.elicit_url("Log in to the ticket system", url, "el-1")
        group.cancel_scope.cancel()  # answered (by a click or after the notification)
    _record("login", phase="answered", action=answer.action)
    return f"login: {answer.action}"


async def _serve() -> None:
    """The handshake-only loop (`serve_loop`), as a 2025-era server serves: the SDK's own
    `run` serves both eras, and the client would pick the current one. (The SDK has no public
    accessor for the low-level server an `MCPServer` wraps.)"""
    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(
            low, read, write, lifespan_state=state, init_options=low.create_initialization_options()
        )


if __name__ == "__main__":
    Path(os.environ["OPS_PID"]).write_text(str(os.getpid()))
    anyio.run(_serve)
