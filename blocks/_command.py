"""A slash command's text read as a tool's arguments, and the usage line that explains them.

`/deploy api 2.3 prod` fills the tool's parameters in order (`service`, `version`,
`environment`); `name=value` fills one by name, in any place; quotes group words
(`/note text="two words"`). Each word is read as the parameter's schema wants (a number, a bool,
a list as JSON) and the whole is validated against the tool's schema, so what reaches the run is
what the model's call would have had to be.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from typing import Any

from ._errors import InvalidAnswer
from ._text import escape
from ._validate import describe, schema_errors

__all__ = ["CommandError", "command_usage", "parse_command", "parse_partial"]

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_YES = {"yes": True, "y": True, "on": True, "no": False, "n": False, "off": False}
_HINT_LIMIT = 60


class CommandError(InvalidAnswer):
    """The command's text does not make arguments for its tool; the message says why."""


def parse_command(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments `text` gives a tool with parameter schema `schema`, or `CommandError`."""
    try:
        words = shlex.split(text)
    except ValueError:
        raise CommandError("A quote is not closed.") from None
    properties: dict[str, Any] = schema.get("properties") or {}
    names = list(properties)
    arguments: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if sep and _NAME.fullmatch(key):
            if key not in properties:
                raise CommandError(f"There is no parameter `{escape(key)}`.")
            if key in arguments:
                raise CommandError(f"`{key}` is given twice.")
            arguments[key] = _read(value, properties[key], schema)
            continue
        free = next((name for name in names if name not in arguments), None)
        if free is None:
            raise CommandError(f"One word too many: `{escape(_cut(word))}`.")
        arguments[free] = _read(word, properties[free], schema)
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        raise CommandError("Missing " + ", ".join(f"`{name}`" for name in missing) + ".")
    errors = schema_errors(schema, arguments)
    if errors:
        error = errors[0]
        where = ".".join(str(part) for part in error.absolute_path)
        prefix = f"`{escape(where)}`: " if where else ""
        raise CommandError(f"{prefix}{describe(error).rstrip('.')}.")
    return arguments


def parse_partial(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """What of `text` can be kept when it does not make valid arguments (to pre-fill the
    command's form): each value its parameter's schema accepts, read as `parse_command` reads
    it; unknown names, repeats, extra words and values that do not fit are left out."""
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    properties: dict[str, Any] = schema.get("properties") or {}
    names = list(properties)
    read: dict[str, Any] = {}
    for word in words:
        key, sep, value = word.partition("=")
        if sep and _NAME.fullmatch(key):
            if key in properties and key not in read:
                read[key] = _read(value, properties[key], schema)
            continue
        # A positional word takes its place even when it does not fit, so the next word
        # lands where the person meant it to.
        free = next((name for name in names if name not in read), None)
        if free is not None:
            read[free] = _read(word, properties[free], schema)
    return {
        name: value
        for name, value in read.items()
        if isinstance(properties[name], dict)
        and not schema_errors({**properties[name], "$defs": schema.get("$defs", {})}, value)
    }


def _read(word: str, prop: Any, schema: dict[str, Any]) -> Any:
    """`word` as the first reading the parameter's schema accepts: the text itself, JSON
    (`2`, `true`, `'["a"]'`), yes/no for a bool, or `a,b` for a list; the text when none does
    (validation then says why)."""
    readings: list[Any] = [word]
    with contextlib.suppress(ValueError):
        readings.append(json.loads(word))
    if word.lower() in _YES:
        readings.append(_YES[word.lower()])
    readings.append(word.split(","))  # a list: `a,b`
    if not isinstance(prop, dict):
        return word
    # The parameter's schema with the definitions its `$ref`s point to.
    alone = {**prop, "$defs": schema.get("$defs", {})}
    for reading in readings:
        if not schema_errors(alone, reading):
            return reading
    return readings[1] if len(readings) > 1 and not isinstance(readings[1], str) else word


def command_usage(command: str, schema: dict[str, Any], description: str = "") -> str:
    """`Usage: /deploy <service: api|web> <version> [environment=staging]` and the tool's
    description, as mrkdwn."""
    required = set(schema.get("required", ()))
    parts: list[str] = []
    for name, prop in (schema.get("properties") or {}).items():
        hint = _hint(prop if isinstance(prop, dict) else {})
        if name in required:
            parts.append(f"<{name}{': ' + hint if hint else ''}>")
        else:
            default = prop.get("default") if isinstance(prop, dict) else None
            shown = "..." if default is None else json.dumps(default, ensure_ascii=False)
            parts.append(f"[{name}={shown.strip(chr(34))}]")
    line = f"Usage: `{escape(' '.join([command, *parts]))}`"
    summary = description.strip().splitlines()[0] if description.strip() else ""
    return f"{line}\n{escape(_cut(summary, 200))}" if summary else line


def _hint(prop: dict[str, Any]) -> str:
    for option in prop.get("anyOf") or ():
        if isinstance(option, dict) and option.get("type") != "null":
            return _hint(option)
    if isinstance(prop.get("enum"), list):
        return _cut("|".join(str(value) for value in prop["enum"]), _HINT_LIMIT)
    kind = prop.get("type")
    return kind if isinstance(kind, str) and kind != "string" else ""


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
