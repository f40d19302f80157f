"""Hides secret-looking argument values before they are shown to people."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "redact"]

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|credential"
    r"|private[_-]?key|auth|bearer|cookie|session",
    re.IGNORECASE,
)


def redact(value: Any) -> Any:
    """A copy of `value` where every value under a secret-looking key is replaced."""
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(key, str) and _SECRET_KEY.search(key) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value
