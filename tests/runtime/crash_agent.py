"""An agent for the SIGKILL tests: `python -m tests.runtime.crash_agent RUN_ID TOOL MARKERS [AT]`.

Its model calls `first`, then TOOL (`once`, not idempotent, or `again`, idempotent), then answers
with their results. Every execution of a tool appends a line to `MARKERS/<tool>`. Run as a
process, it stops at the point AT of TOOL's call, prints that point's name and blocks until the
test kills the process:

- `in-tool` (the default): TOOL has written its line and prints `STARTED`;
- `before-mark`: the run's save that marks TOOL's call started is about to be sent
  (`MARKING`): it never reaches the store;
- `after-mark`: that save is in the store and has not returned yet (`MARKED`), so TOOL has
  not been called.

The two marks are seen at the store's boundary: the agent's store is the real one, wrapped.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from bot import Agent, Tool, current_call
from bot.testing import FunctionModel
from state import RunRecord, StopGuard, Store, open_store

Point = Literal["in-tool", "before-mark", "after-mark"]


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


class _StopsAtTheMark:
    """The real store, except that the save marking `tool`'s call started stops the process's
    work before it is sent (`before-mark`) or once it is written (`after-mark`)."""

    def __init__(self, store: Store, tool: str, at: Point) -> None:
        self._store = store
        self._tool = tool
        self._at = at

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        marks = any(
            c.name == self._tool and c.tool_call_id in run.started for c in run.pending_calls
        )
        if not marks:
            return await self._store.save_run(run, stop=stop, then=then)
        if self._at == "before-mark":
            await _stop_here("MARKING")
        await self._store.save_run(run, stop=stop)
        await _stop_here("MARKED")
        return True


async def _stop_here(point: str) -> None:
    print(point, flush=True)
    await asyncio.Event().wait()  # until SIGKILL


async def main(run_id: str, tool: str, markers: str, at: Point = "in-tool") -> None:
    async with open_store() as store:
        if at != "in-tool":
            store = cast(Store, _StopsAtTheMark(store, tool, at))
        agent = build(Path(markers), tool, block=at == "in-tool", store=store)
        await agent(prompt="go", run_id=run_id).collect()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))  # type: ignore[arg-type]
