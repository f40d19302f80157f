"""A user's own agent for `handback dev --agent`: one tool that asks for a whole form."""

from __future__ import annotations

from typing import Any

from bot import Agent, suspend
from bot.testing import FunctionModel

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "minutes": {"type": "integer", "minimum": 5, "maximum": 240, "title": "Minutes"},
        "day": {"type": "string", "format": "date", "title": "Day"},
        "environment": {"type": "string", "enum": ["dev", "staging", "prod"]},
        "why": {"type": "string", "title": "Why"},
    },
    "required": ["minutes", "day", "environment", "why"],
}


def schedule_maintenance() -> str:
    """Ask for a maintenance window and book it."""
    answer = suspend(
        {"question": "When should the maintenance window be?"},
        kind="ask_user",
        response_schema=SCHEMA,
    )
    return (
        f"{answer['minutes']} minutes on {answer['day']} in {answer['environment']}: "
        f"{answer['why']}"
    )


def script(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = messages[-1]
    if last["role"] == "tool":
        return f"Booked {last['content']}"
    return [{"name": "schedule_maintenance", "arguments": {}}]


agent = Agent(
    name="scheduler",
    model=FunctionModel(script, name="scripted form"),
    tools=[schedule_maintenance],
)
