"""Edit before approve: the form an approver changes a call's arguments in, and reading it back.

Offered when the approval's rule says `editable` (`Approval(editable=True)`). The form is drawn
from the approval's `arguments_schema` by the same plan as a command's form
(`_form.object_fields`), pre-filled with the call's arguments as the card shows them. An argument
shown redacted (a secret-looking name, or `[redacted]` anywhere inside its value) gets no input:
the form says it is kept, its block is never read back, and the schema it is checked against
leaves it out, so the only value it can have is the model's (the runtime merges the edit over
the model's arguments and never takes such a key from it). The answer is
`{"approved": true, "arguments": {...}}`, checked against the stored answer schema too.
"""

from __future__ import annotations

from typing import Any, Final

from state import CorruptRecordError, InteractionRecord, approval_of, is_approval

from ._errors import InvalidAnswer
from ._form import Field, object_fields
from ._form_values import prefill, read_form
from ._ids import CALLBACK_EDIT_MODAL
from ._kit import context, section
from ._modal import input_block
from ._payloads import ModalSubmission
from ._text import inline_code, plain, to_display
from ._validate import validate

__all__ = [
    "REDACTED",
    "can_edit",
    "edit_fields",
    "edited_arguments",
    "locked_arguments",
    "render_edit_modal",
]

REDACTED: Final = "[redacted]"
"""What the runtime shows in place of a secret-looking argument (`bot._redact.REDACTED`)."""

_TITLE_LIMIT: Final = 24
_TOOL_LIMIT: Final = 200
_LOCKED_SHOWN: Final = 15


def _hides_secret(value: Any) -> bool:
    if isinstance(value, str) and REDACTED in value:
        return True  # Whole, or a masked part of a text (`token=[redacted]`).
    if isinstance(value, dict):
        return any(_hides_secret(item) for item in value.values())
    if isinstance(value, list):
        return any(_hides_secret(item) for item in value)
    return False


def _arguments(record: InteractionRecord) -> dict[str, Any]:
    arguments = record.payload.get("arguments")
    return arguments if isinstance(arguments, dict) else {}


def locked_arguments(record: InteractionRecord) -> list[str]:
    """The arguments of an approval that cannot be edited: shown redacted, whole or in part."""
    return [str(key) for key, value in _arguments(record).items() if _hides_secret(value)]


def _editable_schema(record: InteractionRecord) -> dict[str, Any] | None:
    """The argument schema without the locked arguments; None when nothing is left to edit."""
    schema = record.payload.get("arguments_schema")
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    locked = set(locked_arguments(record))
    properties = {k: v for k, v in schema["properties"].items() if k not in locked}
    if not properties:
        return None
    editable = {**schema, "properties": properties}
    required = schema.get("required")
    if isinstance(required, list):
        editable["required"] = [name for name in required if name not in locked]
    return editable


def edit_fields(record: InteractionRecord) -> list[Field] | None:
    """The inputs of the edit form, in parameter order; None when the arguments do not make a
    form (no schema, nothing but secrets, too many parameters for a modal)."""
    schema = _editable_schema(record)
    return None if schema is None else object_fields(record.interaction_id, schema)


def can_edit(record: InteractionRecord) -> bool:
    """Whether the card offers "Edit and approve": an approval whose rule is `editable` and
    whose arguments make a form. A rule that cannot be read offers nothing (fail closed)."""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return False
    return rule is not None and rule.editable and edit_fields(record) is not None


def render_edit_modal(record: InteractionRecord) -> dict[str, Any] | None:
    """The edit form for `views.open`, pre-filled with the call's arguments; None when the
    arguments cannot be edited (`can_edit`)."""
    fields = edit_fields(record) if can_edit(record) else None
    if fields is None:
        return None
    tool = inline_code(to_display(record.payload.get("tool", "?")), _TOOL_LIMIT)
    intro = f"Change the arguments of {tool} as needed, then approve: it runs with these."
    blocks = [section(intro)]
    arguments = _arguments(record)
    blocks += [prefill(input_block(field), field, arguments) for field in fields]
    locked = locked_arguments(record)
    if locked:
        # A context element holds 2000 characters: 15 names of at most 100 fit with room.
        names = ", ".join(inline_code(name, 100) for name in locked[:_LOCKED_SHOWN])
        more = f" and {len(locked) - _LOCKED_SHOWN} more" if len(locked) > _LOCKED_SHOWN else ""
        blocks.append(
            context(f"🔒 Hidden, and kept as the agent gave them (not editable): {names}{more}")
        )
    return {
        "type": "modal",
        "callback_id": CALLBACK_EDIT_MODAL,
        "private_metadata": record.interaction_id,
        "title": plain("Edit and approve", _TITLE_LIMIT),
        "submit": plain("Approve", _TITLE_LIMIT),
        "close": plain("Cancel", _TITLE_LIMIT),
        "blocks": blocks,
    }


def edited_arguments(record: InteractionRecord, submission: ModalSubmission) -> dict[str, Any]:
    """The approval answer a submitted edit form gives: `{"approved": true, "arguments": ...}`
    with only the editable arguments, valid for the tool's schema; `InvalidAnswer` with inline
    `errors` by block id otherwise."""
    if submission.interaction_id != record.interaction_id:
        raise InvalidAnswer("This form belongs to a different request.")
    if not is_approval(record) or not can_edit(record):
        raise InvalidAnswer("The arguments of this request cannot be edited.")
    fields = edit_fields(record)
    assert fields is not None  # `can_edit` said so
    edited = read_form(fields, submission.values, _editable_schema(record))
    if not isinstance(edited, dict):
        raise InvalidAnswer("This form does not hold a call's arguments.")
    answer = {"approved": True, "arguments": edited}
    validate(record.response_schema, answer)
    return answer
