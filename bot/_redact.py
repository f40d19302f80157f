"""Hides secret-looking argument values before they are shown to people."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "redact", "redact_schema"]

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|credential"
    r"|private[_-]?key|auth|bearer|cookie|session",
    re.IGNORECASE,
)


def redact(value: Any, keys: frozenset[str] = frozenset()) -> Any:
    """A copy of `value` where every value under a secret-looking key, or under one of `keys`
    (a tool's own list, compared without case), is replaced."""
    if isinstance(value, dict):
        return {
            key: REDACTED if _secret(key, keys) else redact(item, keys)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [redact(item, keys) for item in value]
    return value


def redact_schema(schema: Any, keys: frozenset[str] = frozenset()) -> Any:
    """A copy of a JSON Schema where the `default` and `examples` of every property with a
    secret-looking name (or one of `keys`) are replaced: the schema is shown like the arguments."""
    if isinstance(schema, list):
        return [redact_schema(item, keys) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: redact_schema(value, keys) for key, value in schema.items()}
    properties = copy.get("properties")
    if isinstance(properties, dict):
        for name, spec in properties.items():
            if _secret(name, keys) and isinstance(spec, dict):
                for hidden in ("default", "examples"):
                    if hidden in spec:
                        spec[hidden] = REDACTED
    return copy


def _secret(key: object, keys: frozenset[str]) -> bool:
    return isinstance(key, str) and (key.lower() in keys or bool(_SECRET_KEY.search(key)))
