"""`handback dev`: run the playground until Ctrl+C and print where to open it."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import webbrowser

from state import StoreError

from .._agent_ref import DEFAULT_AGENT, AgentRefError
from .._config_file import load_agent
from ..slack import ConfigError
from ._example import example_agent, example_reply
from ._playground import Playground

__all__ = ["main"]

_EXIT_USAGE = 2

EXAMPLE_REF = "--example-mcp (python -m bot.playground.example_mcp)"
"""How the banner names the example agent."""


def main(
    agent: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8080,
    open_browser: bool = True,
    example_mcp: bool = False,
) -> int:
    """Serve the playground for the agent at `agent` (MODULE:ATTR or FILE.toml), or with
    `example_mcp` for the bundled example MCP server's agent; the exit code."""
    if example_mcp and agent not in (None, DEFAULT_AGENT):
        return _fail("--example-mcp runs its own agent: give it without an agent or a file")
    ref = EXAMPLE_REF if example_mcp else agent or DEFAULT_AGENT
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        loaded = example_agent() if example_mcp else load_agent(ref)
        return asyncio.run(_serve(Playground(loaded, host=host, port=port), ref, open_browser))
    except (AgentRefError, ConfigError, StoreError) as error:
        return _fail(str(error))
    except OSError as error:
        # Almost always the port: in use, or not ours to bind.
        return _fail(f"cannot listen on {host}:{port}: {error.strerror or error}")
    except KeyboardInterrupt:
        return 130


async def _serve(playground: Playground, ref: str, open_browser: bool) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with playground:
        # The label reads "model: NAME" on the page; the banner names the field itself.
        model = playground.model_label.removeprefix("model: ")
        if playground.offline:
            model += " (set OPENAI_API_KEY to use a real model)"
        print(f"handback playground: {playground.url}", flush=True)
        print(f"  agent: {ref}\n  model: {model}", flush=True)
        where = playground.store_in_use
        kept = " (removed when it stops)" if playground.store_url is None else ""
        print(f"  store: {where}{kept}; `handback audit --store {where}` reads it", flush=True)
        if playground.offline and ref != DEFAULT_AGENT and playground.script is not example_reply:
            # The demo model only knows the chat-ops example's tools and scenarios.
            print(
                "  note: the demo model scripts the chat-ops example's tools; set "
                "OPENAI_API_KEY (and OPENAI_BASE_URL) to drive your own agent",
                flush=True,
            )
        print("  Ctrl+C stops it.", flush=True)
        if open_browser:
            await loop.run_in_executor(None, webbrowser.open, playground.url)
        await stop.wait()
    print("handback playground stopped.", flush=True)
    return 0


def _fail(message: str) -> int:
    print(f"handback: {message}", file=sys.stderr)
    return _EXIT_USAGE
