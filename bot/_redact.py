"""Hides secret-looking argument values before they are shown to people."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["REDACTED", "mask_text", "redact", "redact_schema"]

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|pwd|secret|token|api[_-]?key|access[_-]?key|credential"
    r"|private[_-]?key|auth|bearer|cookie|session",
    re.IGNORECASE,
)


_SECRET_PAIR = re.compile(
    rf"((?:{_SECRET_KEY.pattern})[A-Za-z0-9_\-]*\s*[=:]\s*(?:bearer\s+)?|\bbearer\s+)"
    r"(\"[^\"]*\"|'[^']*'|\S+)",
    re.IGNORECASE,
)
_TOKEN_SHAPE = re.compile(
    r"\b(?:xox[a-z]-|xapp-|gh[pousr]_|github_pat_|sk-|AKIA|ASIA)[A-Za-z0-9_\-]{6,}"
)


def mask_text(text: str) -> str:
    """`text` with secret-looking parts replaced: what follows a secret-looking name and `=`
    or `:` (`token=hunter2`, `password: x`, `Bearer x`), and well-known token shapes
    (`xoxb-…`, `ghp_…`, `sk-…`, `AKIA…`)."""
    text = _SECRET_PAIR.sub(lambda m: m.group(1) + REDACTED, text)
    return _TOKEN_SHAPE.sub(REDACTED, text)


def redact(value: Any, keys: frozenset[str] = frozenset()) -> Any:
    """A copy of `value` where every value under a secret-looking key, or under one of `keys`
    (a tool's own list, compared without case), is replaced, and secret-looking parts of any
    other text are masked (`mask_text`)."""
    if isinstance(value, str):
        return mask_text(value)
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
