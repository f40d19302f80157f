"""A real MCP server for the tests, written with the SDK's server API: `python ops_server.py
stdio` or `python ops_server.py http PORT`. Each call it runs appends a line to `$OPS_LOG`, so
tests count calls on the server's side; it writes its pid to `$OPS_PID` when it starts and
refuses to start while `$OPS_REFUSE` names a file that exists. With `$OPS_STATE_KEY` it seals
`requestState` with that key (so a restarted server still reads what it minted); without it
the SDK's default, a key held by the process alone."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
from mcp.server.request_state import RequestStateSecurity
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)
from pydantic import BaseModel

_KEY = os.environ.get("OPS_STATE_KEY")
server = MCPServer(
    "ops", request_state_security=RequestStateSecurity(keys=[_KEY]) if _KEY else None
)


def _record(tool: str, arguments: dict[str, object], *, at: float | None = None) -> None:
    """One line of `$OPS_LOG`; `at` (the wall clock) for a call whose timing a test checks."""
    line: dict[str, object] = {"tool": tool, "arguments": arguments}
    if at is not None:
        line["at"] = at
    with Path(os.environ["OPS_LOG"]).open("a") as log:
        log.write(json.dumps(line) + "\n")


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


_REPLICAS = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "title": "Replicas"},
        "reason": {"type": "string", "title": "Reason"},
    },
    "required": ["replicas"],
}
_SURE = {
    "type": "object",
    "properties": {"sure": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["sure"],
}


def _ask(key: str, message: str, schema: dict[str, object], state: str) -> InputRequiredResult:
    form = ElicitRequestFormParams(message=message, requested_schema=schema)
    requests = {key: ElicitRequest(params=form)}
    return InputRequiredResult(input_requests=requests, request_state=state)


@server.tool()
async def scale(service: str, ctx: Context) -> str | InputRequiredResult:
    """Scale a service; asks how many replicas (form elicitation on the current protocol:
    an input-required result), and whether you are sure when it is more than 5."""
    state = ctx.request_state
    answers = {
        key: value.model_dump(mode="json", exclude_none=True)
        for key, value in (ctx.input_responses or {}).items()
    }
    _record("scale", {"service": service, "state": state, "responses": answers})
    if state is None:
        # A fresh round: the state names it, so the log shows which round a retry carries.
        return _ask(
            "replicas", f"How many replicas of {service}?", _REPLICAS, f"r1:{os.urandom(4).hex()}"
        )
    answer = (ctx.input_responses or {}).get("replicas" if state.startswith("r1:") else "sure")
    if not isinstance(answer, ElicitResult):
        return f"no answer in round {state}"
    if answer.action != "accept" or answer.content is None:
        return f"scale of {service}: {answer.action}"
    if state.startswith("r1:"):
        replicas = answer.content["replicas"]
        if isinstance(replicas, int) and replicas > 5:
            return _ask("sure", f"{replicas} replicas is a lot. Sure?", _SURE, f"r2:{replicas}")
        return f"scaled {service} to {replicas}"
    return f"scaled {service} to {state[3:]} (sure: {answer.content['sure']})"


@server.tool()
async def pick(ctx: Context) -> str | InputRequiredResult:
    """Asks for one region from a list (one enum: buttons on the card)."""
    answer = (ctx.input_responses or {}).get("region")
    # Stamped before the state is returned (and sealed): its lifetime starts no earlier.
    _record("pick", {"state": ctx.request_state}, at=time.time())
    if ctx.request_state is None or not isinstance(answer, ElicitResult):
        schema = {
            "type": "object",
            "properties": {"region": {"type": "string", "enum": ["eu", "us", "ap"]}},
            "required": ["region"],
        }
        return _ask("region", "Which region? <!channel> *now*", schema, "pick")
    return f"picked {answer.action} {answer.content}"


@server.tool()
async def login(url: str, ctx: Context) -> str | InputRequiredResult:
    """Sends you to a page to log in (URL elicitation)."""
    answer = (ctx.input_responses or {}).get("login")
    _record("login", {"state": ctx.request_state})
    if ctx.request_state is None or not isinstance(answer, ElicitResult):
        params = ElicitRequestURLParams(message="Log in to the ticket system", url=url)
        return InputRequiredResult(
            input_requests={"login": ElicitRequest(params=params)}, request_state="login"
        )
    return f"login: {answer.action}"


class Window(BaseModel):
    minutes: int


def _window(service: str) -> Elicit[Window]:
    return Elicit(f"How long may {service} be down (minutes)?", Window)


@server.tool()
async def maintain(
    service: str, window: Annotated[ElicitationResult[Window], Resolve(_window)]
) -> str:
    """Takes a service down for maintenance; asks for how long (the SDK's `Elicit` resolver)."""
    _record("maintain", {"service": service, "action": window.action})
    if window.action != "accept":
        return f"maintenance of {service}: {window.action}"
    return f"{service} down for {window.data.minutes} min"


@server.tool()
async def odd(ctx: Context) -> str | InputRequiredResult:
    """Asks with a requestedSchema that is no JSON Schema."""
    _record("odd", {"state": ctx.request_state})
    return _ask("odd", "Odd?", {"type": "object", "properties": {"x": {"type": 7}}}, "odd")


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
