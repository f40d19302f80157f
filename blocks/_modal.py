"""Modals: the form behind an Answer button, and the reason asked for when denying."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Final

from state import InteractionRecord, is_approval

from ._choices import CHECKBOX_MAX_OPTIONS, OPTION_LIMIT
from ._form import Field, form_fields
from ._ids import ACTION_INPUT, CALLBACK_DENY_MODAL, CALLBACK_MODAL, block_id
from ._kit import SECTION_LIMIT, section
from ._summary import main_text
from ._text import cut, cut_mrkdwn, inline_code, plain, to_display

__all__ = ["deny_reason_block_id", "input_block", "render_modal"]

_TITLE_LIMIT: Final = 24
_LABEL_LIMIT: Final = 2000
_HINT_LIMIT: Final = 2000
_PLACEHOLDER_LIMIT: Final = 150
_INPUT_MAX: Final = 3000
_SHORT_TEXT: Final = 150
_BOUND_DIGITS: Final = 30
_DATE_TIME_HINT: Final = "Like 2024-05-01T09:30:00Z (a date, a time and a UTC offset)."


def _numeric(value: Any, *, integer: bool, upper: bool) -> str | None:
    """A schema bound as number_input wants it: a plain decimal (no exponent), rounded inwards
    for whole numbers; None when it cannot be one or is too long to be a useful bound."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if integer:
        text = str(math.floor(value) if upper else math.ceil(value))
    else:
        # `repr` is the shortest exact form; Decimal spells its exponent out as digits.
        text = format(Decimal(repr(value)), "f") if isinstance(value, float) else str(value)
    return text if len(text) <= _BOUND_DIGITS else None


def _text_input(field: Field) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "plain_text_input", "action_id": ACTION_INPUT}
    min_length = field.schema.get("minLength")
    max_length = field.schema.get("maxLength")
    if isinstance(min_length, int) and 0 < min_length <= _INPUT_MAX:
        element["min_length"] = min_length
    if isinstance(max_length, int) and 0 < max_length <= _INPUT_MAX:
        element["max_length"] = max_length
    if element.get("min_length", 0) > element.get("max_length", _INPUT_MAX):
        # Nothing satisfies such a schema; Slack would refuse the whole view over it.
        del element["min_length"]
    if field.control == "json" or not isinstance(max_length, int) or max_length > _SHORT_TEXT:
        element["multiline"] = True
    return element


def _bounded_number(field: Field) -> dict[str, Any]:
    integer = field.control == "integer"
    element: dict[str, Any] = {
        "type": "number_input",
        "action_id": ACTION_INPUT,
        "is_decimal_allowed": not integer,
    }
    low = _numeric(field.schema.get("minimum"), integer=integer, upper=False)
    high = _numeric(field.schema.get("maximum"), integer=integer, upper=True)
    if low is not None:
        element["min_value"] = low
    if high is not None and (low is None or Decimal(high) >= Decimal(low)):
        element["max_value"] = high
    return element


def _choice_element(field: Field) -> dict[str, Any]:
    choices = field.choices
    assert choices is not None
    numbered = choices.numbered(field.span)
    options = [
        {"text": plain(choices.label(index, numbered=numbered), OPTION_LIMIT), "value": str(index)}
        for index in field.span
    ]
    if field.control == "select":
        return {
            "type": "static_select",
            "action_id": ACTION_INPUT,
            "placeholder": plain("Choose an option", _PLACEHOLDER_LIMIT),
            "options": options,
        }
    if len(choices.values) <= CHECKBOX_MAX_OPTIONS:
        return {"type": "checkboxes", "action_id": ACTION_INPUT, "options": options}
    return {
        "type": "multi_static_select",
        "action_id": ACTION_INPUT,
        "placeholder": plain("Choose options", _PLACEHOLDER_LIMIT),
        "options": options,
    }


def _element(field: Field) -> dict[str, Any]:
    if field.choices is not None and not field.typed:
        return _choice_element(field)
    match field.control:
        case "integer" | "number":
            return _bounded_number(field)
        case "date":
            return {"type": "datepicker", "action_id": ACTION_INPUT}
        case "boolean":
            yes = {"text": plain("Yes", OPTION_LIMIT), "value": "true"}
            return {"type": "checkboxes", "action_id": ACTION_INPUT, "options": [yes]}
        case "text" | "json" | "select" | "multi_select":
            return _text_input(field)


def _hint(field: Field) -> str | None:
    description = field.schema.get("description")
    if isinstance(description, str) and description.strip():
        return description
    if field.control == "json":
        return "Enter JSON."
    if field.schema.get("format") == "date-time":
        return _DATE_TIME_HINT
    if field.typed:
        return "Type the option exactly as written; one per line to pick several."
    return None


def input_block(field: Field) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field.block_id,
        "label": plain(field.label, _LABEL_LIMIT),
        "element": _element(field),
        "optional": field.optional_in_slack,
    }
    hint = _hint(field)
    if hint is not None:
        block["hint"] = plain(hint, _HINT_LIMIT)
    return block


def _view(
    record: InteractionRecord,
    *,
    callback_id: str,
    title: str,
    submit: str,
    blocks: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "type": "modal",
        "callback_id": callback_id,
        "private_metadata": record.interaction_id,
        "title": plain(title, _TITLE_LIMIT),
        "submit": plain(submit, _TITLE_LIMIT),
        "close": plain("Cancel", _TITLE_LIMIT),
        "blocks": blocks,
    }


def deny_reason_block_id(record: InteractionRecord) -> str:
    """The block id of the reason input in the deny modal."""
    return block_id(record.interaction_id, "reason")


def _deny_modal(record: InteractionRecord) -> dict[str, Any]:
    tool = inline_code(to_display(record.payload.get("tool", "?")), 200)
    reason = {
        "type": "input",
        "block_id": deny_reason_block_id(record),
        "label": plain("Reason", _LABEL_LIMIT),
        "element": {
            "type": "plain_text_input",
            "action_id": ACTION_INPUT,
            "multiline": True,
            "min_length": 1,
            "max_length": 2000,
        },
        "hint": plain("The agent is told this reason and carries on without the tool.", 200),
    }
    blocks = [section(f"Deny running {tool}?"), reason]
    return _view(
        record, callback_id=CALLBACK_DENY_MODAL, title="Deny request", submit="Deny", blocks=blocks
    )


def render_modal(record: InteractionRecord) -> dict[str, Any]:
    """The modal view for `record` (for `views.open`): the answer form, or for an approval the
    deny-with-reason form. `private_metadata` holds the interaction id."""
    if is_approval(record):
        return _deny_modal(record)
    blocks: list[dict[str, Any]] = []
    _, text = main_text(record)
    if text is not None:
        blocks.append(section(cut_mrkdwn(text, SECTION_LIMIT)))
    blocks += [input_block(field) for field in form_fields(record)]
    title = cut(record.kind.replace("_", " ").capitalize(), _TITLE_LIMIT)
    if record.kind.startswith("ask_user"):
        title = "Your answer"
    return _view(
        record, callback_id=CALLBACK_MODAL, title=title or "Answer", submit="Submit", blocks=blocks
    )
