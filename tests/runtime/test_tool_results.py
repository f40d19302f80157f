"""A tool's return value reaches the model as text, whatever its type."""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import BaseModel

from state import Store

from .conftest import (
    last_tool_results,
    make_agent,
)


class Deployment(BaseModel):
    service: str
    replicas: int


@dataclasses.dataclass
class Report:
    ok: bool
    note: str


async def test_tool_return_values_reach_the_model_as_text(store: Store) -> None:
    values: dict[str, Any] = {
        "none": None,
        "dict": {"a": 1, "ü": "é"},
        "model": Deployment(service="api", replicas=3),
        "dataclass": Report(ok=True, note="fine"),
        "tuple": (1, 2),
        "text": "plain",
        "number": 4.5,
    }

    def give(kind: str) -> Any:
        return values[kind]

    seen: list[str] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": "give", "arguments": {"kind": k}} for k in values]
        seen.extend(last_tool_results(messages))
        return "ok"

    agent = make_agent(store, fn, [give])
    assert (await agent(prompt="x").collect()).status.code == "success"
    assert seen == [
        "null",
        '{"a": 1, "ü": "é"}',
        '{"service": "api", "replicas": 3}',
        '{"ok": true, "note": "fine"}',
        "[1, 2]",
        "plain",
        "4.5",
    ]
