"""Interaction records of every kind, shaped as the runtime stores them."""

from __future__ import annotations

import hashlib
from typing import Any

from state._records import InteractionRecord

CREATED = 1_700_000_000.0


def record(
    kind: str,
    payload: dict[str, Any],
    schema: dict[str, Any] | None = None,
    **fields: Any,
) -> InteractionRecord:
    """A pending record with an id shaped like the runtime's (a hex digest)."""
    digest = hashlib.sha256(repr((kind, payload, schema)).encode()).hexdigest()
    values: dict[str, Any] = {
        "interaction_id": digest[:32],
        "run_id": "run_" + digest[32:48],
        "kind": kind,
        "payload": payload,
        "response_schema": schema,
        "channel": "C0CHANNEL",
        "thread_ts": "1699999999.000001",
        "requester": "U0REQUEST",
        "created_at": CREATED,
        "expires_at": CREATED + 86_400,
    }
    values.update(fields)
    return InteractionRecord(**values)


def approval(
    arguments: dict[str, Any] | None = None, tool: str = "deploy", **kw: Any
) -> InteractionRecord:
    payload = {"tool": tool, "arguments": arguments or {}, "tool_call_id": "call_1"}
    return record("approval", payload, **kw)


def confirm(action: str = "Restart the api service", **kw: Any) -> InteractionRecord:
    return record("confirm", {"action": action}, {"type": "boolean"}, **kw)


def ask(
    question: str = "Which database?", options: list[str] | None = None, **kw: Any
) -> InteractionRecord:
    schema: dict[str, Any] = (
        {"type": "string", "enum": options} if options else {"type": "string", "minLength": 1}
    )
    return record("ask_user", {"question": question, "options": options}, schema, **kw)


def ask_multi(
    question: str = "Which regions?", options: list[str] | None = None, **kw: Any
) -> InteractionRecord:
    options = options if options is not None else ["eu", "us", "ap"]
    schema = {
        "type": "array",
        "items": {"type": "string", "enum": options},
        "minItems": 1,
        "uniqueItems": True,
    }
    return record("ask_user_multi", {"question": question, "options": options}, schema, **kw)
