"""The form behind an Answer button: which inputs a schema needs, and reading them back.

`form_fields` is the single plan both directions use: `render_modal` draws it and
`answer_from_submission` reads the submitted view through it, so a block id always means the same
field. Values read back are turned into the stored option or a typed value here; whether they
satisfy the schema is `_validate`'s job.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import date
from typing import Any, Final, Literal

from state import HandbackError, InteractionRecord, is_elicitation

from ._choices import PAGE_SIZE, Choices, choices_of
from ._elicit import elicit_choices, requested_schema
from ._ids import block_id

__all__ = [
    "MAX_CHUNKS",
    "Control",
    "Field",
    "FieldError",
    "InputValue",
    "form_fields",
    "object_fields",
    "parse_index",
    "parse_text",
    "read_field",
    "selected_indexes",
]

Control = Literal["text", "json", "integer", "number", "date", "boolean", "select", "multi_select"]

MAX_CHUNKS: Final = 90
"""Select menus per modal (a modal holds 100 blocks); options past them are typed instead."""
_MAX_FIELDS: Final = 95
"""Inputs per modal, leaving room for the question; a bigger object form is typed as JSON."""
_INTEGER = re.compile(r"[+-]?[0-9]{1,30}")
_NUMBER = re.compile(r"[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,3})?")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
# ASCII only: `int("١")` is 1, and a reference must look exactly like one we rendered.
_INDEX = re.compile(r"(0|[1-9][0-9]{0,8})")


@dataclass(kw_only=True, frozen=True)
class InputValue:
    """What one input element of a submitted view holds, as Slack sent it."""

    text: str | None = None
    """A plain_text_input or number_input value."""
    selected: tuple[str, ...] = ()
    """Option values from a select, multi-select or checkboxes: indexes we rendered."""
    date: str | None = None
    """A datepicker's `selected_date`."""


@dataclass(kw_only=True, frozen=True)
class Field:
    """One input of the form."""

    block_id: str
    label: str
    control: Control
    required: bool
    schema: dict[str, Any]
    key: str | None
    """The property this field fills in an object answer; None when it is the whole answer."""
    choices: Choices | None = None
    span: range = range(0)
    """The indexes into `choices.values` this select offers (a chunk of at most 100)."""
    typed: bool = False
    """A text input for options past the last select chunk, matched against stored options."""
    nullable: bool = False
    """The schema also allows null, which is what a required field left empty then means."""

    @property
    def optional_in_slack(self) -> bool:
        """Whether Slack may submit it empty: a choice split over several inputs is checked
        as a whole when read back, not by Slack per input."""
        if self.control == "boolean" or not self.required or self.nullable:
            return True
        return self.choices is not None and len(self.span) < len(self.choices.values)


def _non_null(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`(schema of the value, nullable)`. `type: [X, "null"]`, and an `anyOf`/`oneOf` of X and
    `{"type": "null"}` (what pydantic writes for `X | None`), get X's input, not a JSON box."""
    kind = schema.get("type")
    if isinstance(kind, list) and "null" in kind:
        rest = [name for name in kind if name != "null"]
        if len(rest) == 1:
            return {**schema, "type": rest[0]}, True
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if not isinstance(branches, list) or len(branches) != 2:
            continue
        rest = [branch for branch in branches if branch != {"type": "null"}]
        if len(rest) == 1 and isinstance(rest[0], dict):
            outer = {name: value for name, value in schema.items() if name != key}
            return {**rest[0], **outer}, True
    return schema, False


def _control(schema: dict[str, Any]) -> Control:
    kind = schema.get("type")
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "select"
    if kind == "array":
        items = schema.get("items")
        if isinstance(items, dict) and isinstance(items.get("enum"), list) and items["enum"]:
            return "multi_select"
        return "json"
    if kind == "boolean":
        return "boolean"
    if kind == "integer":
        return "integer"
    if kind == "number":
        return "number"
    if kind == "string":
        return "date" if schema.get("format") == "date" else "text"
    if not schema:
        return "text"
    return "json"


def _schema_choices(schema: dict[str, Any], control: Control) -> Choices | None:
    if control == "select":
        return Choices(values=tuple(schema["enum"]), multiple=False)
    if control == "multi_select":
        return Choices(values=tuple(schema["items"]["enum"]), multiple=True)
    return None


def _choice_fields(
    interaction_id: str,
    choices: Choices,
    *,
    key: str | None,
    label: str,
    required: bool,
    part: str,
) -> list[Field]:
    control: Control = "multi_select" if choices.multiple else "select"
    count = len(choices.values)
    if count <= PAGE_SIZE:
        return [
            Field(
                block_id=block_id(interaction_id, part),
                label=label,
                control=control,
                required=required,
                schema={},
                key=key,
                choices=choices,
                span=range(count),
            )
        ]
    # Over 100 options: one optional menu per hundred (each menu filters as you type), read
    # back together, so every option stays reachable.
    fields = [
        Field(
            block_id=block_id(interaction_id, f"{part}c{chunk}"),
            label=f"{label} ({start + 1}–{min(start + PAGE_SIZE, count)} of {count})",
            control=control,
            required=required,
            schema={},
            key=key,
            choices=choices,
            span=range(start, min(start + PAGE_SIZE, count)),
        )
        for chunk, start in enumerate(range(0, min(count, MAX_CHUNKS * PAGE_SIZE), PAGE_SIZE))
    ]
    if count > MAX_CHUNKS * PAGE_SIZE:
        fields.append(
            Field(
                block_id=block_id(interaction_id, f"{part}t"),
                label=f"Or type an option not listed above ({count} in all)",
                control="text",
                required=required,
                schema={},
                key=key,
                choices=choices,
                span=range(MAX_CHUNKS * PAGE_SIZE, count),
                typed=True,
            )
        )
    return fields


def _property_label(name: str, schema: dict[str, Any]) -> str:
    title = schema.get("title")
    if isinstance(title, str) and title.strip():
        return title
    return name if name.strip() else "(unnamed)"


def object_fields(interaction_id: str, schema: dict[str, Any]) -> list[Field] | None:
    """One input per property, or None when the schema is not a form that fits a modal."""
    properties = schema.get("properties")
    if (
        schema.get("type") != "object"
        or not isinstance(properties, dict)
        or not 0 < len(properties) <= _MAX_FIELDS
        or not all(isinstance(sub, dict) for sub in properties.values())
    ):
        return None
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    fields: list[Field] = []
    for index, (name, declared) in enumerate(properties.items()):
        sub, nullable = _non_null(declared)
        control = _control(sub)
        label = _property_label(str(name), sub)
        needed = name in required_names
        sub_choices = _schema_choices(sub, control)
        if sub_choices is not None:
            fields += _choice_fields(
                interaction_id,
                sub_choices,
                key=name,
                label=label,
                required=needed,
                part=f"p{index}",
            )
            continue
        fields.append(
            Field(
                block_id=block_id(interaction_id, f"p{index}"),
                label=label,
                control=control,
                required=needed,
                schema=sub,
                key=name,
                nullable=nullable,
            )
        )
    return fields if len(fields) <= _MAX_FIELDS else None


def _elicitation_fields(record: InteractionRecord) -> list[Field]:
    """The inputs of an MCP server's form: its one list as one choice, else one field per
    property of its `requestedSchema` (which the spec keeps flat)."""
    iid = record.interaction_id
    picked = elicit_choices(record)
    if picked is not None:
        name, choices = picked
        label = _property_label(name, requested_schema(record)["properties"][name])
        return _choice_fields(iid, choices, key=None, label=label, required=True, part="v")
    schema = requested_schema(record)
    fields = object_fields(iid, schema)
    if fields is not None:
        return fields
    # Too many fields for a modal: one JSON input, still checked against the server's schema.
    return [
        Field(
            block_id=block_id(iid, "v"),
            label="Your answer",
            control=_control(schema),
            required=True,
            schema=schema,
            key=None,
        )
    ]


def form_fields(record: InteractionRecord) -> list[Field]:
    """The inputs that answer `record`, in display order."""
    iid = record.interaction_id
    if is_elicitation(record):
        return _elicitation_fields(record)
    schema, nullable = _non_null(record.response_schema or {})
    choices = choices_of(record)
    if choices is not None:
        return _choice_fields(iid, choices, key=None, label="Your answer", required=True, part="v")
    fields = object_fields(iid, schema)
    if fields is not None:
        return fields
    control = _control(schema)
    label = _property_label("Your answer", schema)
    sub_choices = _schema_choices(schema, control)
    if sub_choices is not None:
        return _choice_fields(iid, sub_choices, key=None, label=label, required=True, part="v")
    return [
        Field(
            block_id=block_id(iid, "v"),
            label=label,
            control=control,
            required=control != "boolean",
            schema=schema,
            key=None,
            nullable=nullable,
        )
    ]


class FieldError(HandbackError):
    """A field's input cannot be read as its type; the message is shown next to the field."""


def parse_integer(text: str) -> int:
    text = text.strip()
    if not _INTEGER.fullmatch(text):
        raise FieldError("Enter a whole number")
    return int(text)


def parse_number(text: str) -> int | float:
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        raise FieldError("Enter a number")
    number = float(text)
    if not math.isfinite(number):
        raise FieldError("Enter a number")
    if _INTEGER.fullmatch(text):
        return int(text)
    return number


def parse_date(text: str) -> str:
    text = text.strip()
    try:
        if not _DATE.fullmatch(text):
            raise ValueError(text)
        date.fromisoformat(text)
    except ValueError:
        raise FieldError("Enter a date as YYYY-MM-DD") from None
    return text


def parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise FieldError("Enter valid JSON") from None


def parse_text(control: Control, text: str) -> Any:
    """A typed value from text, for the controls a person can type into."""
    match control:
        case "integer":
            return parse_integer(text)
        case "number":
            return parse_number(text)
        case "date":
            return parse_date(text)
        case "json":
            return parse_json(text)
        case "boolean":
            lowered = text.strip().lower()
            if lowered in ("yes", "y", "true"):
                return True
            if lowered in ("no", "n", "false"):
                return False
            raise FieldError("Answer yes or no")
        case "text":
            return text.strip()
        case "select" | "multi_select":
            raise FieldError("Choose from the options")


def parse_index(reference: str) -> int | None:
    """The option index or page number a control sent, if it is one we could have rendered."""
    return int(reference) if _INDEX.fullmatch(reference) else None


def selected_indexes(field: Field, references: tuple[str, ...]) -> list[int]:
    """The stored option indexes that `references` point at, refusing any outside the field."""
    indexes: list[int] = []
    for reference in references:
        index = parse_index(reference)
        if index is None or index not in field.span:
            raise FieldError("Choose one of the options")
        if index not in indexes:
            indexes.append(index)
    return indexes


def _typed_indexes(field: Field, text: str) -> list[int]:
    assert field.choices is not None
    wanted = [line.strip().casefold() for line in text.splitlines() if line.strip()]
    labels = field.choices.labels
    found: list[int] = []
    for line in wanted:
        matches = [i for i in range(len(labels)) if labels[i].casefold() == line]
        if not matches:
            raise FieldError("No option is called that; pick from the menus above")
        found.append(matches[0])
    return found


Reading = tuple[bool, Any]
"""`(present, value)`; for choice fields the value is a list of stored option indexes."""


def read_field(field: Field, value: InputValue | None) -> Reading:
    """What `field` holds in a submission; raises `FieldError` for unreadable input."""
    if field.choices is not None:
        if value is None:
            return False, []
        if field.typed:
            text = (value.text or "").strip()
            return (True, _typed_indexes(field, text)) if text else (False, [])
        indexes = selected_indexes(field, value.selected)
        return bool(indexes), indexes
    if field.control == "boolean":
        return True, value is not None and "true" in value.selected
    if value is None:
        return False, None
    if field.control == "date":
        return (True, parse_date(value.date)) if value.date else (False, None)
    entered = value.text
    if entered is None or not entered.strip():
        return False, None
    return True, parse_text(field.control, entered)
