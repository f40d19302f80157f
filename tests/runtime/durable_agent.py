"""An agent for the cross-process tests: `python -m tests.runtime.durable_agent ask|resume ...`."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from bot import Agent, Tool
from bot.events import InteractionEvent
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


async def main(argv: list[str]) -> None:
    agent = Agent(
        name="durable",
        model=FunctionModel(script),
        tools=[Tool(deploy, requires_approval=True), ask_user],
    )
    async with agent:
        if argv[0] == "ask":
            events = [e async for e in agent(prompt="deploy api")]
            pending = {e.kind: e.interaction_id for e in events if isinstance(e, InteractionEvent)}
            print(json.dumps({"run_id": events[-1].run_id, "pending": pending}), flush=True)
        else:
            run_id, answers = argv[1], json.loads(argv[2])
            result = await agent(parent_id=run_id, resume=answers).collect()
            print(json.dumps({"status": result.status.code, "output": result.output}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
