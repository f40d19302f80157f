"""A slash command's form: drawn from the tool's schema, pre-filled with what the text gave,
read back and validated against the schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blocks import (
    CommandOrigin,
    InvalidAnswer,
    arguments_from_submission,
    parse_command_submission,
    parse_partial,
    render_command_modal,
)
from state import schema_errors

from ._slack import check_view, submit
from .test_command import SCHEMA

ORIGIN = CommandOrigin(command="/scale", channel="C0CHANNEL", user="U0ANSWER1")


def _ids(view: dict[str, Any]) -> dict[str, str]:
    return {b["label"]["text"]: b["block_id"] for b in view["blocks"] if b["type"] == "input"}


def test_the_form_is_prefilled_with_what_fits() -> None:
    view = render_command_modal(ORIGIN, SCHEMA, parse_partial("web count=0 yes", SCHEMA))
    assert view is not None
    check_view(view)
    inputs = {b["label"]["text"]: b["element"] for b in view["blocks"] if b["type"] == "input"}
    assert inputs["service"]["initial_option"]["text"]["text"] == "web"
    assert "initial_value" not in inputs["count"]  # 0 is below the minimum: left to fill
    assert inputs["force"]["initial_options"][0]["value"] == "true"
    assert json.loads(view["private_metadata"]) == {
        "command": "/scale",
        "channel": "C0CHANNEL",
        "user": "U0ANSWER1",
    }


def test_a_submission_reads_back_as_arguments() -> None:
    view = render_command_modal(ORIGIN, SCHEMA, {})
    assert view is not None
    ids = _ids(view)
    payload = submit(view, {ids["service"]: ["1"], ids["count"]: "3", ids["tags"]: '["a"]'})
    submission = parse_command_submission(payload)
    assert submission.origin == ORIGIN and submission.view_id == "V0VIEW"
    arguments = arguments_from_submission(SCHEMA, submission)
    assert arguments == {"service": "web", "count": 3, "force": False, "tags": ["a"]}


def test_invalid_values_come_back_inline() -> None:
    view = render_command_modal(ORIGIN, SCHEMA, {})
    assert view is not None
    ids = _ids(view)
    payload = submit(view, {ids["service"]: ["0"], ids["count"]: "0"})
    with pytest.raises(InvalidAnswer) as raised:
        arguments_from_submission(SCHEMA, parse_command_submission(payload))
    assert raised.value.errors == {ids["count"]: "Must be at least 1"}


def test_a_form_with_forged_metadata_is_not_read() -> None:
    view = render_command_modal(ORIGIN, SCHEMA, {})
    assert view is not None
    payload = submit(view)
    payload["view"]["private_metadata"] = '{"command": "/scale", "channel": "C1"}'
    with pytest.raises(InvalidAnswer):
        parse_command_submission(payload)


@given(st.text(max_size=200))
def test_whatever_is_typed_prefills_only_valid_values(text: str) -> None:
    kept = parse_partial(text, SCHEMA)
    for name, value in kept.items():
        assert not schema_errors(SCHEMA["properties"][name], value)
    view = render_command_modal(ORIGIN, SCHEMA, kept, problem="Missing `count`.")
    assert view is not None
    check_view(view)
