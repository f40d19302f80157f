"""Checking an answer against the stored `response_schema`, with messages a person can act on."""

from __future__ import annotations

from typing import Any

from jsonschema.exceptions import ValidationError

from state import AnswerSchemaError
from state import schema_errors as _schema_errors

from ._errors import InvalidAnswer
from ._text import cut, to_display

__all__ = ["describe", "schema_errors", "validate"]

_MESSAGE_LIMIT = 150


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
    """Every violation of `schema` by `value`, most relevant first (the validator the runtime
    uses too); `InvalidAnswer` when the schema itself is broken."""
    try:
        return _schema_errors(schema, value)
    except AnswerSchemaError as exc:
        raise InvalidAnswer(f"This request has an invalid answer schema: {exc}") from exc


def validate(schema: dict[str, Any] | None, value: Any) -> None:
    """Raise `InvalidAnswer` with a human message when `value` breaks `schema`."""
    errors = schema_errors(schema, value)
    if errors:
        raise InvalidAnswer(describe(errors[0]))
