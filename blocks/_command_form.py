"""The form a slash command opens when its text does not make valid arguments.

`/deploy api` (a missing version) opens a modal with one input per parameter of the tool, drawn
from its JSON schema by the same plan as a question's form (`_form.object_fields`), pre-filled with
what the text did give. Its `private_metadata` is the `CommandOrigin` (command, channel, who typed
it), so that a submission is checked and recorded without a store read; its values are read back
through the same plan and validated against the tool's schema (`arguments_from_submission`).
"""

from __future__ import annotations

from typing import Any, Final

from ._errors import InvalidAnswer
from ._form import Field, object_fields
from ._form_values import prefill, read_form
from ._ids import CALLBACK_COMMAND_MODAL
from ._kit import section
from ._modal import input_block
from ._payloads import CommandOrigin, CommandSubmission
from ._text import cut, escape, plain

__all__ = ["arguments_from_submission", "command_fields", "render_command_modal"]

_FORM_ID: Final = "command"
"""Stands where a question's form has its interaction id, in every block id of the form."""
_TITLE_LIMIT: Final = 24
_INTRO_LIMIT: Final = 2000


def command_fields(schema: dict[str, Any]) -> list[Field] | None:
    """The inputs of a tool's form, in parameter order; None when the parameters do not make a
    form that fits a modal (then the command is answered with its usage instead)."""
    return object_fields(_FORM_ID, schema)


def render_command_modal(
    origin: CommandOrigin,
    schema: dict[str, Any],
    arguments: dict[str, Any],
    *,
    problem: str = "",
) -> dict[str, Any] | None:
    """The form for running `origin.command` (for `views.open`), pre-filled with `arguments`
    (only what the person typed: nothing else, no defaults, is put in a field, so a secret
    parameter never shows a value they did not give); `problem` (mrkdwn, escaped) says what
    was wrong with the text. None when the parameters do not fit a modal."""
    fields = command_fields(schema)
    if fields is None:
        return None
    intro = f"Fill in the arguments of `{escape(origin.command)}`."
    if problem:
        intro = f"{cut(problem, _INTRO_LIMIT - len(intro) - 1)}\n{intro}"
    form = [section(intro)]
    form += [prefill(input_block(field), field, arguments) for field in fields]
    return {
        "type": "modal",
        "callback_id": CALLBACK_COMMAND_MODAL,
        "private_metadata": origin.to_metadata(),
        "title": plain(origin.command, _TITLE_LIMIT),
        "submit": plain("Run", _TITLE_LIMIT),
        "close": plain("Cancel", _TITLE_LIMIT),
        "blocks": form,
    }


def arguments_from_submission(schema: dict[str, Any], submission: CommandSubmission) -> Any:
    """The arguments a submitted command form holds, valid for `schema`; `InvalidAnswer` with
    inline `errors` by block id otherwise. Fields left empty are left out (the tool's defaults)."""
    fields = command_fields(schema)
    if fields is None:
        raise InvalidAnswer("This command no longer takes its arguments from a form.")
    arguments = read_form(fields, submission.values, schema)
    if not isinstance(arguments, dict):
        raise InvalidAnswer("This form does not hold a command's arguments.")
    return arguments
