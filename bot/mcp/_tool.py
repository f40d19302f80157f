"""`MCPTool`: one tool of an MCP server as a handback `Tool`, so the step gates, journals and
audits it like a Python tool; its arguments are checked against the server's input schema."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp_types import Tool as ServerTool

from state import schema_errors

from .._tool import ArgumentsError, Tool, json_object
from ._gate import Gate

__all__ = ["MCPTool"]

CHANNEL_RULE = "this channel's rule"
"""Why a tool is gated when only a channel's own rule gates it."""

Call = Callable[[str, dict[str, Any]], Awaitable[str]]
"""Sends `tools/call` for the server's tool name with these arguments; the result as text."""


class MCPTool(Tool):
    """A server's tool: `name` is what the model calls (`<server>_<tool>`), `remote` the
    server's own name for it.

    `Tool.__init__` reads a Python signature; an MCP tool has a JSON Schema instead, so the
    attributes the runtime reads are set here, and `parse_arguments` validates with the schema.
    """

    def __init__(
        self,
        *,
        server: str,
        name: str,
        remote: ServerTool,
        gate: Gate,
        redact: frozenset[str],
        call: Call,
    ) -> None:
        self.server = server
        self.remote = remote.name
        self.gate = gate
        self.name = name
        self.description = remote.description or remote.title or ""
        self.requires_approval = gate.rule
        self.idempotent = gate.idempotent
        self.pure = False
        self.command = None
        self.redact = redact
        self.is_async = True
        schema = dict(remote.input_schema) if isinstance(remote.input_schema, dict) else {}
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        self.parameters = schema
        self._call = call
        self.handler = self._invoke_remote

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.server!r})"

    @property
    def gated_because(self) -> str | None:
        """Why its calls wait for approval, for the card and the audit; None when they don't."""
        return self.gate.reason

    def approval_context(self) -> dict[str, str]:
        context = {"server": self.server, "server_tool": self.remote}
        # A tool the server's rules leave ungated is gated in a channel only by its rule.
        reason = self.gate.reason or (CHANNEL_RULE if self.channel_rule else None)
        if reason is not None:
            context["gated_because"] = reason
        return context

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        data = json_object(raw)
        try:
            errors = schema_errors(self.parameters, data)
        except Exception as exc:  # a schema the server got wrong: refuse, don't guess
            raise ArgumentsError(f"the server's input schema cannot be read: {exc}") from None
        if errors:
            problems = "; ".join(
                f"`{'.'.join(str(p) for p in err.absolute_path) or 'arguments'}`: {err.message}"
                for err in errors[:5]
            )
            raise ArgumentsError(problems)
        return data

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        return await self._call(self.remote, arguments)

    async def _invoke_remote(self, **arguments: Any) -> str:
        return await self._call(self.remote, arguments)
