"""A bot process for the kill -9 test: `python -m tests.mcp.elicit_agent RUN_ID DIR`.

Runs an agent whose model calls `ops_scale` on an `ops_server.py` (stdio; it seals its
`requestState` with `STATE_KEY`, so the server a restarted bot starts can read it) with the
store `$HANDBACK_STORE`; once the run paused on the server's question it prints
`PAUSED <interaction id>` and blocks until it is killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

from bot import Agent
from bot.mcp import MCPServer
from bot.testing import FunctionModel
from state import Store, open_store

from .conftest import ops_in


def agent(store: Store, server: MCPServer) -> Agent:
    def script(messages: list[dict[str, Any]]) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return [{"name": "ops_scale", "arguments": {"service": "api"}}]
        return "done: " + results[-1]

    return Agent(name="ops", model=FunctionModel(script), tools=[server], store=store)


STATE_KEY = "a key the test server seals its requestState with"


def server_in(directory: Path) -> MCPServer:
    return ops_in(directory, state_key=STATE_KEY).stdio(approvals={"scale": False})


async def _main(run_id: str, directory: Path, url: str) -> None:
    async with open_store(url) as store, server_in(directory) as server:
        async for event in agent(store, server)("scale api", run_id=run_id):
            if event.type == "INTERACTION":
                print("PAUSED", event.interaction.interaction_id, flush=True)
        threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], Path(sys.argv[2]), os.environ["HANDBACK_STORE"]))
