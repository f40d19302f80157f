"""Interaction records of every kind, shaped as the runtime stores them."""

from __future__ import annotations

import hashlib
from typing import Any

from state import InteractionRecord

CREATED = 1_700_000_000.0
LONGEST_INTERACTION_ID = 235
"""The longest interaction id whose block ids still fit Slack's 255 characters, as a figure:
a change to the id scheme that makes room for less fails the tests that use it."""
# What the runtime stores for approvals (bot._step.APPROVAL_SCHEMA), kept here so that these
# tests exercise `blocks` alone.
APPROVAL_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"},
                "approvers": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
    ]
}


def record(
    kind: str,
    payload: dict[str, Any],
    schema: dict[str, Any] | None = None,
    **fields: Any,
) -> InteractionRecord:
    """A pending record with an id shaped like the runtime's (a hex digest)."""
    digest = hashlib.sha256(repr((kind, payload, schema)).encode()).hexdigest()
    values: dict[str, Any] = {
        "interaction_id": "int_" + digest[:32],
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
    return record("approval", payload, APPROVAL_SCHEMA, **kw)


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


PING = "<!channel> & <https://evil.example|click here> <@U0EVIL> <!here> >quote"
LONG = "Please decide " + "very " * 1000 + "carefully."
WORLD = "🚀 déploiement 部署 Развёртывание 👨‍👩‍👧‍👦 عربى " * 3
TEXTS = {"ping": PING, "long": LONG, "world": WORLD, "empty": ""}


def options_of(text: str, count: int) -> list[str]:
    return [f"{text[:200]} #{index}" for index in range(count)]


def adversarial_records(text: str) -> dict[str, InteractionRecord]:
    """One record of every shape the renderer meets, with `text` in every text field."""
    nested = {"text": text, "list": [text, {"deep": text}], text[:40] or "k": 1}
    return {
        "approval": approval(
            {"command": text, "password": "[redacted]", "nested": nested}, tool=text
        ),
        "approval-no-args": approval({}, tool=text),
        "confirm": confirm(text),
        "ask-free": ask(text),
        "ask-2": ask(text, options_of(text, 2)),
        "ask-6": ask(text, options_of(text, 6)),
        "ask-100": ask(text, options_of(text, 100)),
        "ask-101": ask(text, options_of(text, 101)),
        "ask-150": ask(text, options_of(text, 150)),
        "ask-empty-options": ask(text, []),
        "multi-3": ask_multi(text, options_of(text, 3)),
        "multi-11": ask_multi(text, options_of(text, 11)),
        "multi-150": ask_multi(text, options_of(text, 150)),
        "multi-empty": ask_multi(text, []),
        "generic-none": record(text or "x", {"question": text, "extra": text, "n": 3}),
        "generic-empty-kind": record("", {"whatever": text}),
        "generic-integer": record(
            "pick_number", {"prompt": text}, {"type": "integer", "minimum": 0}
        ),
        "generic-number": record("weird kind " + text, {"text": text}, {"type": "number"}),
        "generic-date": record("when", {"question": text}, {"type": "string", "format": "date"}),
        "generic-bool": record("toggle", {"question": text}, {"type": "boolean"}),
        "generic-enum": record("mood", {"question": text}, {"enum": [text, 1, None, True]}),
        "generic-array": record(
            "tags", {"question": text}, {"type": "array", "items": {"enum": options_of(text, 12)}}
        ),
        "generic-object": record(
            "form",
            {"question": text, **{f"k{i}<&>": text for i in range(12)}},
            {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0, "maximum": 10, "title": text},
                    "ratio": {"type": "number", "description": text},
                    "day": {"type": "string", "format": "date"},
                    "name": {"type": "string", "maxLength": 40},
                    "size": {"enum": ["s", "m", "l"]},
                    "flags": {"type": "array", "items": {"enum": options_of(text, 150)}},
                    "ok": {"type": "boolean"},
                    "meta": {"type": "object"},
                },
                "required": ["count", "size"],
            },
        ),
        "generic-anyof": record(
            "odd", {"x": [1, 2]}, {"anyOf": [{"type": "string"}, {"type": "null"}]}
        ),
        "generic-nested-payload": record("odd", {"deep": {"a": [text] * 50}}),
    }
