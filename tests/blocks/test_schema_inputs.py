"""Odd answer schemas in a form: enums of non-strings, nullable types, unions and refs,
nested objects, formats and bounds, each typed as Slack can take it and validated on read."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import (
    InvalidAnswer,
    answer_from_text,
    render_modal,
)

from ._factory import record
from ._roundtrip import (
    input_blocks,
    modal_answer,
    modal_errors,
    pick,
)
from ._slack import check_view


@pytest.mark.parametrize(
    "enum", [[1, 2, 3], [True, False], [None], [None, 0, False, "", 0.0], [{"a": 1}, [1, 2]]]
)
def test_schema_enums_of_non_strings_answer_with_the_exact_value(enum: list[Any]) -> None:
    rec = record("pick", {"question": "Which?"}, {"enum": enum})
    for index, expected in enumerate(enum):
        answer = pick(rec, index)
        assert answer == expected
        assert type(answer) is type(expected)
    check_view(render_modal(rec))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 20}]},
    ],
)
def test_a_nullable_string_is_typed_as_text_not_json(schema: dict[str, Any]) -> None:
    rec = record("note", {"question": "Anything to add?"}, schema)
    view = render_modal(rec)
    check_view(view)
    [field] = input_blocks(view)
    assert field["element"]["type"] == "plain_text_input"
    assert field.get("hint", {}).get("text") != "Enter JSON."
    assert modal_answer(rec, {field["block_id"]: "ship it"}) == "ship it"
    # Left empty, a nullable answer is null rather than "Required".
    assert modal_answer(rec, {}) is None
    # A plain thread reply answers it too, as for any free-text question.
    assert answer_from_text(rec, "  ship it ") == "ship it"


def test_a_nullable_property_gets_its_own_input() -> None:
    # What pydantic writes for `replicas: int | None = None` and `note: str | None`.
    schema = {
        "type": "object",
        "properties": {
            "replicas": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Replicas"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
        },
        "required": ["note"],
    }
    rec = record("form", {"question": "Scale?"}, schema)
    view = render_modal(rec)
    check_view(view)
    replicas, note = input_blocks(view)
    assert replicas["element"]["type"] == "number_input"
    assert note["element"]["type"] == "plain_text_input"
    assert note["optional"] is True
    answer = modal_answer(rec, {replicas["block_id"]: "3", note["block_id"]: "hi"})
    assert answer == {"replicas": 3, "note": "hi"}
    # A required nullable field left empty is null; an optional one is left out.
    assert modal_answer(rec, {}) == {"note": None}


@pytest.mark.parametrize(
    ("schema", "entry", "expected"),
    [
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "7", 7),
        ({"anyOf": [{"const": "a"}, {"const": "b"}]}, '"b"', "b"),
        ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, "5", 5),
    ],
)
def test_union_and_ref_schemas_are_typed_as_json_and_validated(
    schema: dict[str, Any], entry: str, expected: Any
) -> None:
    rec = record("pick", {"question": "Value?"}, schema)
    view = render_modal(rec)
    check_view(view)
    [field] = input_blocks(view)
    assert modal_answer(rec, {field["block_id"]: entry}) == expected
    assert modal_errors(rec, {field["block_id"]: "[1]"})


@pytest.mark.parametrize("ref", ["#/$defs/missing", "https://example.invalid/schema.json"])
def test_a_ref_that_cannot_be_resolved_is_an_invalid_answer(ref: str) -> None:
    # jsonschema raises its own `Unresolvable`; the app only catches `InvalidAnswer`.
    rec = record("pick", {"question": "Value?"}, {"$ref": ref})
    view = render_modal(rec)
    check_view(view)
    [field] = input_blocks(view)
    with pytest.raises(InvalidAnswer, match="schema"):
        modal_answer(rec, {field["block_id"]: "1"})
    with pytest.raises(InvalidAnswer, match="schema"):
        answer_from_text(
            record("pick", {"question": "Value?"}, {"$ref": ref, "type": "string"}), "x"
        )


def test_nested_objects_in_a_modal_are_typed_as_json() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "limits": {
                "type": "object",
                "properties": {"cpu": {"type": "integer", "minimum": 1}},
                "required": ["cpu"],
            },
        },
        "required": ["limits"],
    }
    rec = record("form", {"question": "Limits?"}, schema)
    view = render_modal(rec)
    check_view(view)
    name, limits = input_blocks(view)
    assert name["element"]["type"] == "plain_text_input"
    assert limits["element"]["multiline"] is True
    answer = modal_answer(rec, {limits["block_id"]: '{"cpu": 2}'})
    assert answer == {"limits": {"cpu": 2}}
    errors = modal_errors(rec, {limits["block_id"]: '{"cpu": 0}'})
    assert errors == {limits["block_id"]: "Must be at least 1"}
    errors = modal_errors(rec, {limits["block_id"]: "{cpu: 2"})
    assert errors == {limits["block_id"]: "Enter valid JSON"}


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-05-01T09:30:00Z", "tomorrow at nine"),
        ("date-time", "2024-05-01T09:30:00.5+02:00", "2024-05-01"),
        ("date-time", "2024-05-01T09:30:00+00:00", "2024-02-30T09:30:00Z"),
        ("email", "ops@example.com", "not an address"),
        ("date", "2024-02-29", "2023-02-29"),
    ],
)
def test_formats_are_checked(fmt: str, good: str, bad: str) -> None:
    rec = record("when", {"question": "When?"}, {"type": "string", "format": fmt})
    assert answer_from_text(rec, good) == good
    with pytest.raises(InvalidAnswer):
        answer_from_text(rec, bad)
    check_view(render_modal(rec))


def test_a_date_time_input_says_what_to_type() -> None:
    rec = record("when", {"question": "When?"}, {"type": "string", "format": "date-time"})
    [field] = input_blocks(render_modal(rec))
    assert "2024" in field["hint"]["text"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "minimum": 1e300},
        {"type": "number", "minimum": 1e-7, "maximum": 1e16},
        {"type": "integer", "minimum": -1e20, "maximum": 10**40},
        {"type": "number", "minimum": -0.0, "maximum": 2.5e-3},
    ],
)
def test_number_bounds_are_plain_decimals_slack_accepts(schema: dict[str, Any]) -> None:
    view = render_modal(record("n", {"question": "How many?"}, schema))
    check_view(view)


def test_integer_bounds_round_inwards() -> None:
    schema = {"type": "integer", "minimum": 1.5, "maximum": 4.5}
    [field] = input_blocks(render_modal(record("n", {"question": "How many?"}, schema)))
    assert (field["element"]["min_value"], field["element"]["max_value"]) == ("2", "4")


def test_min_length_above_max_length_is_not_sent_to_slack() -> None:
    schema = {"type": "string", "minLength": 10, "maxLength": 5}
    rec = record("t", {"question": "Text?"}, schema)
    check_view(render_modal(rec))
    with pytest.raises(InvalidAnswer):
        answer_from_text(rec, "abcdefg")
