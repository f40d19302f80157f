"""Edit before approve in Block Kit: the card's button, the pre-filled form, reading it back
(secrets never), and the closed card saying what the approver changed."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from blocks import (
    ACTION_EDIT,
    CALLBACK_EDIT_MODAL,
    InvalidAnswer,
    answer_from_submission,
    locked_arguments,
    parse_block_action,
    parse_view_submission,
    render,
    render_card,
    render_edit_modal,
    render_modal,
)

# Kept out of `blocks.__all__` (only the Slack app's internals use it): pinned here directly.
from blocks._edit import REDACTED, can_edit

# The runtime's mask, to pin that the card shows the very same one.
from bot._redact import REDACTED as RUNTIME_REDACTED
from state import Approval, InteractionRecord

from ._factory import APPROVAL_SCHEMA, TEXTS, options_of, record
from ._slack import check_message, check_view, click, submit

# What the runtime stores for approvals now: `arguments` is an approver's edit.
EDIT_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "boolean"},
        {
            "type": "object",
            "properties": {
                "approved": {"type": "boolean"},
                "reason": {"type": "string"},
                "arguments": {"type": "object"},
            },
            "required": ["approved"],
            "additionalProperties": False,
        },
    ]
}

# As pydantic writes it for deploy(service: Literal[...], version: str, replicas: int = 1,
# token: str = "", options: dict = {}).
ARGUMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "service": {"enum": ["api", "web"], "title": "Service", "type": "string"},
        "version": {"title": "Version", "type": "string"},
        "replicas": {"default": 1, "minimum": 1, "title": "Replicas", "type": "integer"},
        "token": {"default": REDACTED, "title": "Token", "type": "string"},
        "options": {"default": {}, "title": "Options", "type": "object"},
    },
    "required": ["service", "version"],
    "additionalProperties": False,
}
EDITABLE = Approval(editable=True)
ARGUMENTS = {
    "service": "api",
    "version": "2.3",
    "replicas": 2,
    "token": REDACTED,
    "options": {"region": "eu", "password": REDACTED},
}


def _approval(
    rule: Approval | None = EDITABLE,
    arguments: dict[str, Any] | None = None,
    schema: dict[str, Any] | None = ARGUMENTS_SCHEMA,
    response_schema: dict[str, Any] = EDIT_SCHEMA,
) -> InteractionRecord:
    payload: dict[str, Any] = {
        "tool": "deploy",
        "arguments": ARGUMENTS if arguments is None else arguments,
        "tool_call_id": "call_1",
    }
    if schema is not None:
        payload["arguments_schema"] = schema
    if rule is not None:
        payload["rule"] = rule.to_json()
    return record("approval", payload, response_schema)


def _inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}


def _edit(rec: InteractionRecord, entries: dict[str, Any]) -> Any:
    view = render_edit_modal(rec)
    assert view is not None
    return answer_from_submission(rec, parse_view_submission(submit(view, entries)))


def _by_label(rec: InteractionRecord, **typed: Any) -> dict[str, Any]:
    view = render_edit_modal(rec)
    assert view is not None
    inputs = _inputs(view)
    return {inputs[label]["block_id"]: value for label, value in typed.items()}


def test_the_runtime_and_the_form_mean_the_same_redaction() -> None:
    assert REDACTED == RUNTIME_REDACTED


def test_an_editable_approval_offers_edit_and_approve_which_opens_a_form() -> None:
    rec = _approval()
    card = render_card(rec)
    check_message(card)
    buttons = [e for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert [b["action_id"] for b in buttons] == [
        "hb:approve",
        ACTION_EDIT,
        "hb:deny",
        "hb:deny_reason",
    ]
    action = parse_block_action(click(card, ACTION_EDIT))
    assert action.intent == "open_modal" and action.action == ACTION_EDIT


@pytest.mark.parametrize(
    "rec",
    [
        _approval(rule=Approval()),
        _approval(rule=None),  # stored before rules: today's default, not editable
        _approval(schema=None),
        _approval(arguments={"token": REDACTED}, schema={"type": "object", "properties": {}}),
    ],
    ids=["not-editable", "old-record", "no-schema", "nothing-but-secrets"],
)
def test_no_edit_button_when_it_cannot_be_used(rec: InteractionRecord) -> None:
    assert not can_edit(rec)
    assert ACTION_EDIT not in str(render_card(rec)["blocks"])
    assert render_edit_modal(rec) is None


def test_a_corrupt_rule_offers_no_edit() -> None:
    rec = _approval()
    broken = dataclasses.replace(rec, payload={**rec.payload, "rule": {"count": "many"}})
    assert not can_edit(broken)
    assert ACTION_EDIT not in str(render_card(broken)["blocks"])


def test_the_form_is_prefilled_and_secrets_get_no_input() -> None:
    rec = _approval()
    view = render_edit_modal(rec)
    assert view is not None
    check_view(view)  # slack_sdk's View, and Slack's limits
    assert view["callback_id"] == CALLBACK_EDIT_MODAL
    assert view["private_metadata"] == rec.interaction_id
    assert view["submit"]["text"] == "Approve"
    inputs = _inputs(view)
    assert sorted(inputs) == ["Replicas", "Service", "Version"]
    assert locked_arguments(rec) == ["token", "options"]
    assert inputs["Version"]["element"]["initial_value"] == "2.3"
    assert inputs["Replicas"]["element"]["initial_value"] == "2"
    assert inputs["Service"]["element"]["initial_option"]["text"]["text"] == "api"
    note = str(view["blocks"][-1])
    assert "`token`" in note and "`options`" in note and "not editable" in note
    assert "eu" not in str(view)  # a value with a secret inside is not shown at all
    # The deny form is still what the other modal button opens.
    assert render_modal(rec)["callback_id"] == "hb:deny_modal"


def test_a_valid_edit_approves_with_the_editable_arguments() -> None:
    rec = _approval()
    answer = _edit(rec, _by_label(rec, Service=["1"], Version="2.4", Replicas="3"))
    assert answer == {
        "approved": True,
        "arguments": {"service": "web", "version": "2.4", "replicas": 3},
    }


def test_an_invalid_edit_gets_inline_errors() -> None:
    rec = _approval()
    blocks_by_label = _by_label(rec, Version=None, Replicas=None)
    version, replicas = blocks_by_label
    service = _by_label(rec, Service=["0"])
    for entries, errors in (
        ({**service, version: "", replicas: "2"}, {version: "Required"}),
        ({**service, version: "2.4", replicas: "0"}, {replicas: "Must be at least 1"}),
        ({**service, version: "2.4", replicas: "two"}, {replicas: "Enter a whole number"}),
    ):
        with pytest.raises(InvalidAnswer) as caught:
            _edit(rec, entries)
        assert caught.value.errors == errors


def test_a_tampered_submission_cannot_set_a_secret() -> None:
    rec = _approval()
    view = render_edit_modal(rec)
    assert view is not None
    payload = submit(view, _by_label(rec, Service=["0"], Version="2.4", Replicas="2"))
    # Blocks the form never had, named as a secret's would be: they are not read.
    state = payload["view"]["state"]["values"]
    for part in ("p3", "p4", "token", "v"):
        state[f"hb|{rec.interaction_id}|{part}"] = {
            "hb:input": {"type": "plain_text_input", "value": "stolen"}
        }
    answer = answer_from_submission(rec, parse_view_submission(payload))
    assert answer["arguments"] == {"service": "api", "version": "2.4", "replicas": 2}


def test_an_edit_is_refused_where_the_rule_or_the_stored_schema_does_not_allow_it() -> None:
    editable = _approval()
    view = render_edit_modal(editable)
    assert view is not None
    entries = _by_label(editable, Service=["0"], Version="2.4", Replicas="2")
    for rec in (_approval(rule=Approval()), _approval(response_schema=APPROVAL_SCHEMA)):
        payload = submit({**view, "private_metadata": rec.interaction_id}, entries)
        with pytest.raises(InvalidAnswer):
            answer_from_submission(rec, parse_view_submission(payload))


def test_the_closed_card_says_what_the_approver_changed() -> None:
    rec = _approval()
    answer = {
        "approved": True,
        "arguments": {"service": "api", "version": "2.4 <!here>", "replicas": 2},
    }
    done = dataclasses.replace(
        rec, status="answered", answer=answer, answered_by="U0BOB", answered_at=rec.created_at
    )
    card = render(done)
    check_message(card)
    shown = str(card["blocks"])
    assert "Edited the arguments before approving" in shown
    assert "`version`: `2.3` → `2.4 &lt;!here&gt;`" in shown
    assert "`replicas`" not in shown and "`service`" not in shown  # unchanged
    assert "approved with edits" in card["text"]
    plain = dataclasses.replace(done, answer=True)
    assert "Edited" not in str(render(plain)["blocks"])


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_hostile_arguments_make_a_valid_card_form_and_closed_card(name: str) -> None:
    text = TEXTS[name]
    schema = {
        "type": "object",
        "properties": {
            "note": {"type": "string", "title": text or "Note", "description": text},
            "pick": {"enum": options_of(text, 120)},
            "count": {"type": "integer", "maximum": 10**40},
            text[:60] or "blank": {"type": "object"},
        },
        "required": ["note"],
    }
    arguments = {
        "note": text,
        "pick": options_of(text, 120)[7],
        "count": 3,
        text[:60] or "blank": {},
    }
    rec = _approval(arguments=arguments, schema=schema)
    check_message(render_card(rec))
    view = render_edit_modal(rec)
    assert view is not None
    check_view(view)
    answer = {"approved": True, "arguments": {**arguments, "note": text + "!", "count": 4}}
    done = dataclasses.replace(
        rec, status="answered", answer=answer, answered_by="U0BOB", answered_at=rec.created_at
    )
    check_message(render(done))
