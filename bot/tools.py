"""Ready-made interaction tools: ask a question, pick several options, confirm an action."""

from __future__ import annotations

from typing import Any

from ._suspend import suspend
from ._tool import mark_pure

__all__ = ["ask_user", "ask_user_multi", "confirm"]

# Each is marked pure: it only suspends, so the runtime writes no journal entry around it and
# calls it on the event loop (a worker thread would cost more than the call itself).


@mark_pure
def ask_user(question: str, options: list[str] | None = None) -> str:
    """Ask the user a clarifying question. Use ONLY when blocked. Give `options` when the answer
    must be one of a few choices."""
    schema: dict[str, Any]
    if options:
        schema = {"type": "string", "enum": list(options)}
    else:
        schema = {"type": "string", "minLength": 1}
    return str(
        suspend(
            {"question": question, "options": options or None},
            kind="ask_user",
            response_schema=schema,
        )
    )


@mark_pure
def ask_user_multi(question: str, options: list[str]) -> list[str]:
    """Ask the user to choose one or more of `options`."""
    if not options:
        raise ValueError("ask_user_multi needs at least one option")
    schema = {
        "type": "array",
        "items": {"type": "string", "enum": list(options)},
        "minItems": 1,
        "uniqueItems": True,
    }
    answer = suspend(
        {"question": question, "options": list(options)},
        kind="ask_user_multi",
        response_schema=schema,
    )
    return [str(item) for item in answer]


@mark_pure
def confirm(action: str) -> bool:
    """Ask the user to confirm `action` before doing it."""
    # The schema makes "no" an invalid answer instead of a truthy string.
    return bool(suspend({"action": action}, kind="confirm", response_schema={"type": "boolean"}))
