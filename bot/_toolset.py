"""`Toolset`: a source of tools known only once it is open (an MCP server's tool list)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from ._tool import Tool

__all__ = ["Toolset"]


class Toolset(ABC):
    """Tools an `Agent` offers next to its own, read again at every step: the list may change
    while the process runs (a server that says its tools changed, one that is down).

    `open()` and `aclose()` bound what the toolset holds (sessions, subprocesses); both may be
    called more than once. `Agent` opens its toolsets in `async with agent` and
    `Agent.toolsets_open()`.
    """

    name: str

    @abstractmethod
    def tools(self) -> Sequence[Tool]:
        """The tools offered now; empty while the toolset is not open."""

    @abstractmethod
    async def open(self) -> None:
        """Start what the tools need; returns once the first connection was tried."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop it all; afterwards `tools()` is empty."""
