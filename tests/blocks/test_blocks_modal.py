"""Modals: inputs that match the schema, and submissions read back through the same plan."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import (
    InvalidAnswer,
    answer_from_submission,
    parse_view_submission,
    render,
    render_modal,
)
from state import InteractionRecord

from ._factory import approval, ask, ask_multi, record
from ._roundtrip import (
    all_text,
    answered_record,
    input_blocks,
    modal_answer,
    modal_errors,
)
from ._slack import USER, check_message, check_view, submit

OBJECT_SCHEMA = {
    "type": "object",
    "properties": {
        "replicas": {"type": "integer", "minimum": 1, "maximum": 20, "title": "Replicas"},
        "ratio": {"type": "number", "exclusiveMaximum": 1},
        "day": {"type": "string", "format": "date"},
        "note": {"type": "string", "maxLength": 40, "description": "Shown to the team"},
        "size": {"enum": ["s", "m", "l"]},
        "regions": {"type": "array", "items": {"enum": ["eu", "us"]}, "minItems": 1},
        "dry_run": {"type": "boolean"},
    },
    "required": ["replicas", "size"],
}


def _inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


def _bid(rec: InteractionRecord, part: str) -> str:
    return f"hb|{rec.interaction_id}|{part}"


def _answer(rec: InteractionRecord, entries: dict[str, Any]) -> Any:
    view = render_modal(rec)
    check_view(view)
    submission = parse_view_submission(submit(view, entries))
    assert submission.user_id == USER
    assert submission.interaction_id == rec.interaction_id
    return answer_from_submission(rec, submission)


def _errors(rec: InteractionRecord, entries: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidAnswer) as caught:
        _answer(rec, entries)
    return caught.value.errors


@pytest.mark.parametrize(
    ("schema", "element"),
    [
        (None, {"type": "plain_text_input", "action_id": "hb:input", "multiline": True}),
        (
            {"type": "string", "minLength": 1},
            {
                "type": "plain_text_input",
                "action_id": "hb:input",
                "min_length": 1,
                "multiline": True,
            },
        ),
        (
            {"type": "string", "maxLength": 80},
            {"type": "plain_text_input", "action_id": "hb:input", "max_length": 80},
        ),
        (
            {"type": "integer", "minimum": 0},
            {
                "type": "number_input",
                "action_id": "hb:input",
                "is_decimal_allowed": False,
                "min_value": "0",
            },
        ),
        (
            {"type": "integer", "minimum": 0.5, "maximum": 9},
            {
                "type": "number_input",
                "action_id": "hb:input",
                "is_decimal_allowed": False,
                "min_value": "1",
                "max_value": "9",
            },
        ),
        (
            {"type": "number", "maximum": 2.5},
            {
                "type": "number_input",
                "action_id": "hb:input",
                "is_decimal_allowed": True,
                "max_value": "2.5",
            },
        ),
        ({"type": "string", "format": "date"}, {"type": "datepicker", "action_id": "hb:input"}),
        (
            {"type": "object"},
            {"type": "plain_text_input", "action_id": "hb:input", "multiline": True},
        ),
    ],
)
def test_single_input_matches_the_schema(
    schema: dict[str, Any] | None, element: dict[str, Any]
) -> None:
    rec = record("custom", {"question": "How many <!here>?"}, schema)
    view = render_modal(rec)
    check_view(view)
    assert view["callback_id"] == "hb:modal"
    assert view["private_metadata"] == rec.interaction_id
    assert view["blocks"][0]["text"]["text"] == "How many &lt;!here&gt;?"
    [block] = _inputs(view).values()
    assert block["block_id"] == _bid(rec, "v")
    assert block["element"] == element
    assert block["optional"] is False


def test_object_schema_has_one_input_per_property() -> None:
    rec = record("deploy_form", {"question": "Deploy settings"}, OBJECT_SCHEMA)
    view = render_modal(rec)
    check_view(view)
    inputs = _inputs(view)
    assert list(inputs) == [_bid(rec, f"p{i}") for i in range(7)]
    kinds = [b["element"]["type"] for b in inputs.values()]
    assert kinds == [
        "number_input",
        "number_input",
        "datepicker",
        "plain_text_input",
        "static_select",
        "checkboxes",
        "checkboxes",
    ]
    assert [b["optional"] for b in inputs.values()] == [False, True, True, True, False, True, True]
    assert inputs[_bid(rec, "p0")]["label"]["text"] == "Replicas"
    assert inputs[_bid(rec, "p3")]["hint"]["text"] == "Shown to the team"
    assert view["title"]["text"] == "Deploy form"


def test_object_submission_round_trip() -> None:
    rec = record("deploy_form", {"question": "Deploy settings"}, OBJECT_SCHEMA)
    answer = _answer(
        rec,
        {
            _bid(rec, "p0"): "3",
            _bid(rec, "p1"): "0.25",
            _bid(rec, "p2"): "2024-02-29",
            _bid(rec, "p3"): "  ship it  ",
            _bid(rec, "p4"): ["2"],
            _bid(rec, "p5"): ["1", "0"],
            _bid(rec, "p6"): ["true"],
        },
    )
    assert answer == {
        "replicas": 3,
        "ratio": 0.25,
        "day": "2024-02-29",
        "note": "ship it",
        "size": "l",
        "regions": ["eu", "us"],
        "dry_run": True,
    }


def test_object_submission_with_only_required_fields() -> None:
    rec = record("deploy_form", {"question": "Deploy settings"}, OBJECT_SCHEMA)
    answer = _answer(rec, {_bid(rec, "p0"): "20", _bid(rec, "p4"): ["0"]})
    assert answer == {"replicas": 20, "size": "s", "dry_run": False}


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param(
            {"p0": "2.5", "p4": ["0"]}, {"p0": "Enter a whole number"}, id="decimal-for-integer"
        ),
        pytest.param(
            {"p0": "ten", "p4": ["0"]}, {"p0": "Enter a whole number"}, id="text-for-integer"
        ),
        pytest.param({"p0": "0", "p4": ["0"]}, {"p0": "Must be at least 1"}, id="below-minimum"),
        pytest.param({"p0": "21", "p4": ["0"]}, {"p0": "Must be at most 20"}, id="above-maximum"),
        pytest.param(
            {"p0": "2", "p1": "1", "p4": ["0"]}, {"p1": "Must be less than 1"}, id="exclusive-max"
        ),
        pytest.param({"p0": "2", "p1": "nan", "p4": ["0"]}, {"p1": "Enter a number"}, id="nan"),
        pytest.param(
            {"p0": "2", "p2": "2023-02-29", "p4": ["0"]},
            {"p2": "Enter a date as YYYY-MM-DD"},
            id="bad-date",
        ),
        pytest.param(
            {"p0": "2", "p3": "x" * 41, "p4": ["0"]},
            {"p3": "Must be at most 40 characters"},
            id="too-long",
        ),
        pytest.param(
            {"p0": "2", "p4": ["7"]}, {"p4": "Choose one of the options"}, id="forged-option"
        ),
        pytest.param({"p0": "2"}, {"p4": "Choose an option"}, id="missing-required-select"),
        pytest.param({"p4": ["1"]}, {"p0": "Required"}, id="missing-required-number"),
        pytest.param(
            {"p0": "x", "p4": ["9"]},
            {"p0": "Enter a whole number", "p4": "Choose one of the options"},
            id="two-errors",
        ),
    ],
)
def test_object_submission_errors_by_block(
    entries: dict[str, Any], expected: dict[str, str]
) -> None:
    rec = record("deploy_form", {"question": "Deploy settings"}, OBJECT_SCHEMA)
    errors = _errors(rec, {_bid(rec, k): v for k, v in entries.items()})
    assert errors == {_bid(rec, k): v for k, v in expected.items()}


@pytest.mark.parametrize(
    ("schema", "entry", "expected"),
    [
        ({"type": "integer", "minimum": 0}, "42", 42),
        ({"type": "integer", "minimum": 0}, "-0", 0),
        ({"type": "number"}, "-1.5", -1.5),
        ({"type": "number"}, "7", 7),
        ({"type": "string", "format": "date"}, "2024-12-31", "2024-12-31"),
        ({"type": "string", "minLength": 1}, "ダウンタイム 🚀", "ダウンタイム 🚀"),
        (None, "anything <!channel>", "anything <!channel>"),
        ({"type": "object"}, '{"a": [1, 2]}', {"a": [1, 2]}),
    ],
)
def test_single_value_round_trip(schema: dict[str, Any] | None, entry: str, expected: Any) -> None:
    rec = record("custom", {"question": "?"}, schema)
    assert _answer(rec, {_bid(rec, "v"): entry}) == expected


@pytest.mark.parametrize(
    ("schema", "entry", "message"),
    [
        ({"type": "integer", "minimum": 0}, "-3", "Must be at least 0"),
        ({"type": "integer"}, "1e3", "Enter a whole number"),
        ({"type": "integer"}, "1" * 31, "Enter a whole number"),
        ({"type": "number"}, "inf", "Enter a number"),
        ({"type": "number", "multipleOf": 0.5}, "0.3", "Must be a multiple of 0.5"),
        ({"type": "string", "minLength": 3}, "ab", "Must be at least 3 characters"),
        (
            {"type": "string", "pattern": "^[a-z]+$"},
            "ABC",
            "This does not match the expected format",
        ),
        ({"type": "string", "format": "date"}, "31/12/2024", "Enter a date as YYYY-MM-DD"),
        ({"type": "object"}, "{not json", "Enter valid JSON"),
        ({"type": "object"}, "[1]", "This value has the wrong type"),
        ({"type": "string"}, None, "Required"),
        ({"type": "string"}, "   ", "Required"),
    ],
)
def test_single_value_errors(schema: dict[str, Any], entry: str | None, message: str) -> None:
    rec = record("custom", {"question": "?"}, schema)
    assert _errors(rec, {_bid(rec, "v"): entry}) == {_bid(rec, "v"): message}


def test_boolean_modal_is_a_checkbox() -> None:
    rec = record("custom", {"question": "?"}, {"type": "boolean"})
    [block] = _inputs(render_modal(rec)).values()
    assert block["element"]["type"] == "checkboxes"
    assert block["optional"] is True
    assert _answer(rec, {_bid(rec, "v"): ["true"]}) is True
    assert _answer(rec, {}) is False


def test_ask_user_over_100_options_in_the_modal() -> None:
    options = [f"service-{i:03d}" for i in range(250)]
    rec = ask("Which service?", options)
    view = render_modal(rec)
    check_view(view)
    inputs = _inputs(view)
    assert list(inputs) == [_bid(rec, f"vc{i}") for i in range(3)]
    assert [len(b["element"]["options"]) for b in inputs.values()] == [100, 100, 50]
    assert all(b["optional"] for b in inputs.values())
    assert inputs[_bid(rec, "vc2")]["label"]["text"] == "Your answer (201–250 of 250)"
    assert _answer(rec, {_bid(rec, "vc2"): ["230"]}) == "service-230"
    assert _errors(rec, {}) == {_bid(rec, "vc0"): "Choose an option"}
    two = _errors(rec, {_bid(rec, "vc0"): ["1"], _bid(rec, "vc1"): ["101"]})
    assert two == {
        _bid(rec, "vc0"): "Choose only one option",
        _bid(rec, "vc1"): "Choose only one option",
    }
    # An index from another chunk is a forgery, even if it is a real option.
    assert _errors(rec, {_bid(rec, "vc0"): ["230"]}) == {
        _bid(rec, "vc0"): "Choose one of the options"
    }


def test_ask_user_multi_over_100_options_in_the_modal() -> None:
    options = [f"host-{i}" for i in range(150)]
    rec = ask_multi("Which hosts?", options)
    view = render_modal(rec)
    check_view(view)
    kinds = [b["element"]["type"] for b in _inputs(view).values()]
    assert kinds == ["multi_static_select", "multi_static_select"]
    answer = _answer(rec, {_bid(rec, "vc1"): ["149", "100"], _bid(rec, "vc0"): ["3"]})
    assert answer == ["host-3", "host-100", "host-149"]
    assert _errors(rec, {}) == {_bid(rec, "vc0"): "Choose an option"}


def test_huge_option_lists_can_be_typed() -> None:
    options = [f"item {i}" for i in range(9_050)]
    rec = ask("Which item?", options)
    view = render_modal(rec)
    check_view(view)
    inputs = _inputs(view)
    assert len(inputs) == 91
    assert inputs[_bid(rec, "vt")]["element"]["type"] == "plain_text_input"
    assert _answer(rec, {_bid(rec, "vt"): "ITEM 9049"}) == "item 9049"
    assert _errors(rec, {_bid(rec, "vt"): "item 99999"}) == {
        _bid(rec, "vt"): "No option is called that; pick from the menus above"
    }


def test_deny_with_reason_round_trip() -> None:
    rec = approval({"env": "prod"})
    view = render_modal(rec)
    check_view(view)
    assert view["callback_id"] == "hb:deny_modal"
    assert view["title"]["text"] == "Deny request"
    reason = _bid(rec, "reason")
    assert _answer(rec, {reason: "  not during the freeze <!channel> "}) == {
        "approved": False,
        "reason": "not during the freeze <!channel>",
    }
    assert _errors(rec, {reason: "   "}) == {reason: "Enter a reason"}


def test_a_submission_for_another_interaction_is_refused() -> None:
    rec = record("custom", {"question": "?"}, {"type": "integer"})
    payload = submit(render_modal(rec), {_bid(rec, "v"): "1"})
    payload["view"]["private_metadata"] = "someone-else"
    with pytest.raises(InvalidAnswer, match="different request"):
        answer_from_submission(rec, parse_view_submission(payload))


def test_a_deny_submission_cannot_answer_a_question() -> None:
    rec = ask("Name?")
    payload = submit(render_modal(rec), {_bid(rec, "v"): "x"})
    payload["view"]["callback_id"] = "hb:deny_modal"
    with pytest.raises(InvalidAnswer, match="not an approval"):
        answer_from_submission(rec, parse_view_submission(payload))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"callback_id": "someone_elses_modal"}, id="foreign-callback"),
        pytest.param({"private_metadata": ""}, id="no-metadata"),
        pytest.param(
            {"state": {"values": {"b": {"hb:input": {"value": "x" * 3001}}}}}, id="oversize"
        ),
    ],
)
def test_malformed_submissions(change: dict[str, Any]) -> None:
    rec = ask("Name?")
    payload = submit(render_modal(rec), {})
    payload["view"].update(change)
    with pytest.raises(InvalidAnswer):
        parse_view_submission(payload)


def test_a_property_named_empty_is_still_a_property() -> None:
    schema = {"type": "object", "properties": {"": {"type": "integer"}}, "required": [""]}
    rec = record("odd", {"question": "?"}, schema)
    [block] = _inputs(render_modal(rec)).values()
    assert block["label"]["text"] == "(unnamed)"
    assert _answer(rec, {_bid(rec, "p0"): "5"}) == {"": 5}


def test_a_form_too_big_for_a_modal_is_typed_as_json() -> None:
    properties = {f"f{i}": {"enum": [f"v{j}" for j in range(150)]} for i in range(60)}
    rec = record("huge", {"question": "?"}, {"type": "object", "properties": properties})
    view = render_modal(rec)
    check_view(view)
    [block] = _inputs(view).values()
    assert block["hint"]["text"] == "Enter JSON."
    assert _answer(rec, {_bid(rec, "v"): '{"f3": "v149"}'}) == {"f3": "v149"}
    assert _errors(rec, {_bid(rec, "v"): '{"f3": "nope"}'}) == {
        _bid(rec, "v"): "Choose one of the options"
    }


def test_deny_reason_modal_edges() -> None:
    rec = approval({"service": "api"}, tool="deploy <!channel>")
    view = render_modal(rec)
    check_view(view)
    [reason] = input_blocks(view)
    block = reason["block_id"]
    assert modal_errors(rec, {block: "   \n  "}) == {block: "Enter a reason"}
    assert block in modal_errors(rec, {block: "x" * 2001})
    answer = modal_answer(rec, {block: "  <!channel> not now  "})
    assert answer == {"approved": False, "reason": "<!channel> not now"}
    done = render(answered_record(rec, answer))
    check_message(done)
    assert "<!channel>" not in all_text(done)
    # A deny form cannot answer a question, and an approval cannot be answered by a form.
    with pytest.raises(InvalidAnswer):
        answer_from_submission(ask("Which?"), parse_view_submission(submit(view, {block: "x"})))
