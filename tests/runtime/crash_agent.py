"""An agent for the SIGKILL tests: `python -m tests.runtime.crash_agent RUN_ID TOOL MARKERS`.

Its model calls `first`, then TOOL (`once`, not idempotent, or `again`, idempotent), then answers
with their results. Every execution of a tool appends a line to `MARKERS/<tool>`. Run as a
process, TOOL then prints `STARTED` and blocks until the test kills the process.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from typing import Any

from bot import Agent, Tool, current_call
from bot.testing import FunctionModel
from state import Store


def build(markers: Path, tool: str, *, block: bool, store: Store | None = None) -> Agent:
    def first() -> str:
        _mark(markers, "first", current_call().idempotency_key)
        return "first done"

    def work(item: str) -> str:
        _mark(markers, tool, current_call().idempotency_key)
        if block:
            print("STARTED", flush=True)
            threading.Event().wait()  # until SIGKILL
        return f"{tool} did {item}"

    def script(messages: list[dict[str, Any]]) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return [{"name": "first", "arguments": {}}]
        if len(results) == 1:
            return [{"name": tool, "arguments": {"item": "x"}}]
        return "finished: " + " | ".join(results)

    tools = [first, Tool(work, name=tool, idempotent=tool == "again")]
    return Agent(name="crash", model=FunctionModel(script), tools=tools, store=store)


def marks(markers: Path, tool: str) -> list[str]:
    path = markers / tool
    return path.read_text().splitlines() if path.exists() else []


def _mark(markers: Path, tool: str, key: str) -> None:
    with (markers / tool).open("a") as file:
        file.write(key + "\n")


async def main(run_id: str, tool: str, markers: str) -> None:
    async with build(Path(markers), tool, block=True) as agent:
        await agent(prompt="go", run_id=run_id).collect()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
