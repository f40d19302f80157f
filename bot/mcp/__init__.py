"""MCP servers as toolsets of an agent: their tools behind handback's approval gate.

Uses the official `mcp` SDK's client (`mcp.client.Client`) over stdio or streamable HTTP.
"""

from ._connection import Backoff
from ._server import MCPServer
from ._tool import MCPTool

__all__ = ["Backoff", "MCPServer", "MCPTool"]
