"""Log lines for operators: text or one JSON object per line, never with a secret in them.

`bind()` adds ids (run, thread, interaction, work item) to every line logged afterwards in the
same task; the worker runs each inbox item in a task of its own, so they stay with that item.
Every line, whatever its format, passes `Redactor` last: the configured secrets and anything
shaped like a Slack or OpenAI token become `[redacted]`, in the message and in tracebacks.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Literal

__all__ = ["JsonFormatter", "Redactor", "TextFormatter", "bind", "bound", "configure_logging"]

_BOUND: ContextVar[Mapping[str, str]] = ContextVar(
    "handback_log_fields", default=MappingProxyType({})
)

_TOKEN_SHAPES = re.compile(
    r"xox[abeoprs]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|sk-[A-Za-z0-9_-]{16,}"
    r"|(?<=://)([^:/@\s]*):[^@/\s]+(?=@)"  # the password in a URL such as redis://:pw@host
)

REDACTED = "[redacted]"


def bind(**fields: str | None) -> None:
    """Add `fields` to the lines this task logs from now on (None removes one)."""
    merged = dict(_BOUND.get())
    for key, value in fields.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    _BOUND.set(merged)


def bound() -> Mapping[str, str]:
    """The fields `bind()` set for this task."""
    return _BOUND.get()


class Redactor:
    """Replaces the given secrets and anything shaped like a token with `[redacted]`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return _TOKEN_SHAPES.sub(_redact_match, text)


def _redact_match(match: re.Match[str]) -> str:
    user = match.group(1)
    return REDACTED if user is None else f"{user}:{REDACTED}"


class TextFormatter(logging.Formatter):
    """`time level logger: message [key=value ...]`, redacted."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = bound()
        if fields:
            text += " [" + " ".join(f"{key}={value}" for key, value in fields.items()) + "]"
        return self.redact(text)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, the bound ids,
    and `exception` with the traceback when there is one; redacted."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self.redact(record.getMessage()),
        }
        for key, value in bound().items():
            line.setdefault(key, self.redact(value))
        if record.exc_info:
            line["exception"] = self.redact(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False)


def configure_logging(
    *, level: str, format: Literal["text", "json"], secrets: Iterable[str] = ()
) -> None:
    """Log to stderr at `level` in `format`; replaces any handler the root logger had."""
    redact = Redactor(secrets)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(redact) if format == "json" else TextFormatter(redact))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
