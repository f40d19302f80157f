"""Checking an answer against the stored `response_schema`, with messages a person can act on."""

from __future__ import annotations

import copy
import functools
import re
from datetime import datetime
from typing import Any

import jsonschema
from jsonschema import FormatChecker
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable

from ._errors import InvalidAnswer
from ._text import cut, to_display

__all__ = ["describe", "schema_errors", "validate"]

_MESSAGE_LIMIT = 150
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


@functools.cache
def _format_checker(cls: type[Validator]) -> FormatChecker:
    """The draft's format checker, plus `date-time`: jsonschema checks it only when the optional
    `rfc3339-validator` is installed, and otherwise lets "tomorrow" through silently."""
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(_is_date_time)
    return checker


def _validator(schema: dict[str, Any]) -> Validator:
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InvalidAnswer(f"This request has an invalid answer schema: {exc.message}") from exc
    return cls(schema, format_checker=_format_checker(cls))


def _number(value: Any) -> str:
    return to_display(value)


def _plural(count: Any, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def describe(error: ValidationError) -> str:
    """One short sentence for a schema violation, e.g. "Must be at least 0"."""
    rule, limit = error.validator, error.validator_value
    match rule:
        case "type":
            kinds = limit if isinstance(limit, list) else [limit]
            if "integer" in kinds:
                return "Enter a whole number"
            if "number" in kinds:
                return "Enter a number"
            if "boolean" in kinds:
                return "Choose yes or no"
            if "array" in kinds:
                return "Choose one or more options"
            if "string" in kinds:
                return "Enter some text"
            return "This value has the wrong type"
        case "minimum":
            return f"Must be at least {_number(limit)}"
        case "maximum":
            return f"Must be at most {_number(limit)}"
        case "exclusiveMinimum":
            return f"Must be more than {_number(limit)}"
        case "exclusiveMaximum":
            return f"Must be less than {_number(limit)}"
        case "multipleOf":
            return f"Must be a multiple of {_number(limit)}"
        case "minLength":
            return "Required" if limit == 1 else f"Must be at least {_plural(limit, 'character')}"
        case "maxLength":
            return f"Must be at most {_plural(limit, 'character')}"
        case "pattern":
            return "This does not match the expected format"
        case "format":
            if limit == "date":
                return "Enter a date as YYYY-MM-DD"
            return cut(f"Enter a valid {limit}", _MESSAGE_LIMIT)
        case "enum" | "const":
            return "Choose one of the options"
        case "minItems":
            return f"Choose at least {_plural(limit, 'option')}"
        case "maxItems":
            return f"Choose at most {_plural(limit, 'option')}"
        case "uniqueItems":
            return "Choose each option only once"
        case "required":
            return "Required"
        case "additionalProperties":
            return "This form has a field the request does not accept"
        case _:
            return cut(error.message, _MESSAGE_LIMIT)


def schema_errors(schema: dict[str, Any] | None, value: Any) -> list[ValidationError]:
    """Every violation of `schema` by `value`, most relevant first; none when `schema` is None."""
    if schema is None:
        return []
    try:
        errors = list(_validator(schema).iter_errors(value))
    except Unresolvable as exc:
        # Remote references are never fetched, and a local one may point nowhere.
        raise InvalidAnswer(
            f"This request's answer schema has a `$ref` that cannot be found: {exc}"
        ) from exc
    return sorted(errors, key=jsonschema.exceptions.relevance, reverse=True)


def validate(schema: dict[str, Any] | None, value: Any) -> None:
    """Raise `InvalidAnswer` with a human message when `value` breaks `schema`."""
    errors = schema_errors(schema, value)
    if errors:
        raise InvalidAnswer(describe(errors[0]))
