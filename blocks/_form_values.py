"""A form's values, both ways: pre-filling its inputs with values already given (a command's
text, an approval's arguments), and reading a submission back into the answer it holds, checked
against the schema with each violation shown next to its field.

Its own module so that the forms (`_command_form`, `_edit`, a question's modal) and the reading
of answers (`_answers`) all depend on it, and none on another.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, Final

from ._errors import InvalidAnswer
from ._form import Field, FieldError, InputValue, read_field
from ._validate import describe, schema_errors

__all__ = ["prefill", "read_form"]

_TEXT_LIMIT: Final = 3000
"""The longest text an input is pre-filled with (Slack's `initial_value` limit)."""


def _initial_text(value: Any, field: Field) -> str | None:
    match field.control:
        case "text" | "date":
            text = value if isinstance(value, str) else None
        case "integer" | "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            # number_input wants a plain decimal, never an exponent.
            text = format(Decimal(repr(value)), "f") if isinstance(value, float) else str(value)
        case "json":
            text = json.dumps(value, ensure_ascii=False)
        case _:
            return None
    return text if text is not None and 0 < len(text) <= _TEXT_LIMIT else None


def prefill(block: dict[str, Any], field: Field, arguments: dict[str, Any]) -> dict[str, Any]:
    """`block` with its element showing the argument the person gave for `field`, if any."""
    if field.key not in arguments or field.typed:
        return block
    value = arguments[field.key]
    element = dict(block["element"])
    options: list[dict[str, Any]] = element.get("options") or []
    if field.choices is not None:
        wanted = value if field.choices.multiple and isinstance(value, list) else [value]
        picked = [str(i) for i in field.span if field.choices.values[i] in wanted]
        initial = [option for option in options if option["value"] in picked]
        if not initial:
            return block
        if element["type"] == "static_select":
            element["initial_option"] = initial[0]
        else:
            element["initial_options"] = initial
    elif field.control == "boolean":
        if value is not True:
            return block
        element["initial_options"] = options[:1]
    elif field.control == "date":
        if not isinstance(value, str):
            return block
        element["initial_date"] = value
    else:
        text = _initial_text(value, field)
        if text is None:
            return block
        element["initial_value"] = text
    return {**block, "element": element}


def read_form(
    fields: list[Field], values: dict[str, InputValue], schema: dict[str, Any] | None
) -> Any:
    """The value a submitted form holds (`values` by block id), checked against `schema`;
    `InvalidAnswer` with inline `errors` by block id."""
    errors: dict[str, str] = {}
    # Fields sharing a key are one answer: a choice split into menus of a hundred.
    groups: dict[str | None, list[tuple[Field, bool, Any]]] = {}
    for field in fields:
        try:
            present, value = read_field(field, values.get(field.block_id))
        except FieldError as exc:
            errors[field.block_id] = str(exc)
            continue
        groups.setdefault(field.key, []).append((field, present, value))
    read: dict[str | None, Any] = {}
    for key, readings in groups.items():
        first = readings[0][0]
        if any(field.block_id in errors for field in fields if field.key == key):
            continue
        if first.choices is None:
            _, present, value = readings[0]
            if present:
                read[key] = value
            elif first.required and first.nullable:
                read[key] = None
            elif first.required:
                errors[first.block_id] = "Required"
            continue
        picked = [(field, index) for field, _, indexes in readings for index in indexes]
        if not picked:
            if first.required:
                errors[first.block_id] = "Choose an option"
            continue
        indexes = sorted({index for _, index in picked})
        if first.choices.multiple:
            read[key] = [first.choices.values[index] for index in indexes]
        elif len(indexes) > 1:
            for field, _ in picked:
                errors[field.block_id] = "Choose only one option"
        else:
            read[key] = first.choices.values[indexes[0]]
    if errors:
        raise InvalidAnswer("Some answers need fixing.", errors=errors)
    whole = any(field.key is None for field in fields)
    answer = read.get(None) if whole else {key: v for key, v in read.items() if key is not None}
    _check_form(schema, fields, answer)
    return answer


def _check_form(schema: dict[str, Any] | None, fields: list[Field], answer: Any) -> None:
    """Schema violations, each shown next to the field it concerns."""
    violations = schema_errors(schema, answer)
    if not violations:
        return
    by_key: dict[str | None, str] = {}
    for field in fields:
        by_key.setdefault(field.key, field.block_id)
    fallback = fields[0].block_id
    errors: dict[str, str] = {}
    for violation in violations:
        path = list(violation.absolute_path)
        key = path[0] if path and isinstance(path[0], str) else None
        if violation.validator == "required" and not path:
            names = violation.validator_value
            missing = [
                name
                for name in (names if isinstance(names, list) else [])
                if isinstance(answer, dict) and name not in answer
            ]
            key = str(missing[0]) if missing else None
        target = by_key.get(key, fallback)
        errors.setdefault(target, describe(violation))
    raise InvalidAnswer(describe(violations[0]), errors=errors)
