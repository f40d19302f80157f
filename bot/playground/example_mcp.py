"""The playground's example MCP server, written with the `mcp` SDK's server API:
`python -m bot.playground.example_mcp` serves it over stdio.

Three tools, one of each kind a handback agent gates differently:

- `status` is read-only by annotation: with `trust_annotations` it runs without approval;
- `deploy` is destructive: gated, it runs only once someone approved it;
- `incident` asks who is asking for the severity first, by form elicitation on the current
  protocol (an input-required result with `requestState`), which handback turns into a card.

Deploys are kept in the process, so `status` shows them. With `$HANDBACK_EXAMPLE_LOG` set,
each call the server runs is appended there as a JSON line (the tests count calls with it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ToolAnnotations,
)

__all__ = ["LOG_VARIABLE", "MODULE", "SEVERITIES", "main", "server"]

MODULE = "bot.playground.example_mcp"
"""What `python -m` runs."""

LOG_VARIABLE = "HANDBACK_EXAMPLE_LOG"

SEVERITIES = ("sev1", "sev2", "sev3")

server = MCPServer(
    "example",
    instructions="A toy service fleet: read its status, deploy a version, open an incident.",
)

_deployed: dict[str, str] = {"api": "2.3", "web": "1.9", "worker": "0.8"}


def _record(tool: str, arguments: dict[str, object]) -> None:
    path = os.environ.get(LOG_VARIABLE)
    if path:
        with Path(path).open("a", encoding="utf-8") as log:
            log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def status(service: str | None = None) -> str:
    """The version each service runs (or one service's)."""
    _record("status", {"service": service})
    if service is not None:
        running = _deployed.get(service)
        return f"{service} runs {running}" if running else f"there is no service {service}"
    return ", ".join(f"{name} {version}" for name, version in sorted(_deployed.items()))


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def deploy(service: str, version: str) -> str:
    """Deploy a version of a service (replaces what runs)."""
    _record("deploy", {"service": service, "version": version})
    before = _deployed.get(service, "nothing")
    _deployed[service] = version
    return f"deployed {service} {version} (was {before})"


_SEVERITY = {
    "type": "object",
    "properties": {
        "severity": {"type": "string", "enum": list(SEVERITIES), "title": "Severity"},
    },
    "required": ["severity"],
}


@server.tool(
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
)
async def incident(service: str, ctx: Context) -> str | InputRequiredResult:
    """Open an incident for a service; asks how severe it is first."""
    answer = (ctx.input_responses or {}).get("severity")
    _record(
        "incident",
        {
            "service": service,
            "state": ctx.request_state,
            "answer": answer.model_dump(mode="json", exclude_none=True)
            if isinstance(answer, ElicitResult)
            else None,
        },
    )
    if ctx.request_state is None or not isinstance(answer, ElicitResult):
        form = ElicitRequestFormParams(
            message=f"How severe is the incident on {service}?", requested_schema=_SEVERITY
        )
        return InputRequiredResult(
            input_requests={"severity": ElicitRequest(params=form)},
            request_state=f"incident:{service}",
        )
    if answer.action != "accept" or answer.content is None:
        return f"no incident opened for {service} ({answer.action})"
    return f"opened a {answer.content['severity']} incident for {service}"


def main() -> None:
    server.run("stdio")


if __name__ == "__main__":
    main()
