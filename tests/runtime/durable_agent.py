"""An agent for the cross-process tests: `python -m tests.runtime.durable_agent ask|resume ...`."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from bot import Agent, Tool
from bot.events import InteractionEvent, OutputEvent
from bot.testing import FunctionModel
from bot.tools import ask_user


def deploy(service: str) -> str:
    return f"deployed {service}"


def script(messages: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return [
            {"name": "deploy", "arguments": {"service": "api"}},
            {"name": "ask_user", "arguments": {"question": "env?", "options": ["dev", "prod"]}},
        ]
    return "finished: " + " | ".join(m["content"] for m in messages if m["role"] == "tool")


def delegate(to: str) -> Any:
    """A model that hands each prompt to the agent `to` and reports what it said."""

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": to, "arguments": {"prompt": "deploy api"}}]
        return f"{to} said: {messages[-1]['content']}"

    return fn


async def main(argv: list[str]) -> None:
    agent = Agent(
        name="durable",
        model=FunctionModel(script),
        tools=[Tool(deploy, requires_approval=True), ask_user],
    )
    if argv[0].startswith("nested-"):
        # Two levels deep: outer -> mid -> durable, each its own model.
        argv = [argv[0].removeprefix("nested-"), *argv[1:]]
        mid = Agent(name="mid", model=FunctionModel(delegate("durable")), tools=[agent])
        agent = Agent(name="outer", model=FunctionModel(delegate("mid")), tools=[mid])
    async with agent:
        if argv[0] == "ask":
            events = [e async for e in agent(prompt="deploy api")]
            pending = {e.kind: e.interaction_id for e in events if isinstance(e, InteractionEvent)}
            print(json.dumps({"run_id": events[-1].run_id, "pending": pending}), flush=True)
        else:
            run_id, answers = argv[1], json.loads(argv[2])
            events = [e async for e in agent(parent_id=run_id, resume=answers)]
            result = events[-1]
            assert isinstance(result, OutputEvent)
            out: dict[str, Any] = {"status": result.status.code, "output": result.output}
            if result.status.reason == "input_required":  # paused again: what it still waits for
                out["run_id"] = result.run_id
                out["pending"] = {
                    e.kind: e.interaction_id for e in events if isinstance(e, InteractionEvent)
                }
            print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
