"""Reading a verified body into a payload, the way Bolt reads it: JSON or a form, bounded.

A body that cannot be a payload (not JSON, not a form, nested too deep) is a `Misfit`; what the
payload says is checked afterwards (`_admission.py`).
"""

from __future__ import annotations

import json
from typing import Any, Final

from yarl import query_to_pairs

from state import HandbackError

__all__ = ["MAX_DEPTH", "Misfit", "is_ssl_check", "parse_body"]

MAX_DEPTH: Final = 64
"""Nesting a payload may have; Slack's own (a view with rich text in its state) stay under 20."""

_SSL_CHECK_MAX = 1000
"""Bytes an `ssl_check` body may have: Slack's is `token=...&ssl_check=1`."""


class Misfit(HandbackError, ValueError):
    """A verified payload that does not fit the edge models; the message says where."""


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (without recursion: the value is hostile).

    Level by level, looking only at containers: a card's click holds hundreds of strings and
    numbers, and this runs before every ack."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        below: list[Any] = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
    return depth


def _parse_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise Misfit("the body is not JSON") from None
    if not isinstance(value, dict):
        raise Misfit(f"the body is a JSON {type(value).__name__}, not an object")
    if _depth(value) > MAX_DEPTH:
        raise Misfit(f"the body nests deeper than {MAX_DEPTH} levels")
    return value


def parse_body(text: str, content_type: str | None) -> dict[str, Any]:
    """The payload of a verified body, read the way Bolt reads it (JSON when it says so or
    starts with `{`, else a form with a `payload` field); `Misfit` when it cannot be one.

    The form is read by yarl's `query_to_pairs` (aiohttp's own form reader): the same result as
    the standard library's `parse_qsl`, whose pure-Python unquoting took ~0.1 ms of every
    click's ack (a card's payload is a few KB, a third of it %-escapes).
    """
    if content_type == "application/json" or text.startswith("{"):
        return _parse_json(text)
    try:
        form = dict(query_to_pairs(text))
    except ValueError:
        raise Misfit("the body is not a form") from None
    if "payload" not in form:
        if "command" in form:
            return form  # a slash command: the form is the payload
        raise Misfit("the form has no `payload`")
    return _parse_json(form["payload"])


def is_ssl_check(raw: bytes) -> bool:
    """Whether `raw` is Slack's `ssl_check` of a slash command's Request URL: a small form with
    `ssl_check=1` and no command or payload (Bolt's `SslCheck` reads it the same way)."""
    if len(raw) > _SSL_CHECK_MAX or b"ssl_check=" not in raw:
        return False
    try:
        form = dict(query_to_pairs(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return False
    return form.get("ssl_check") == "1" and "command" not in form and "payload" not in form
