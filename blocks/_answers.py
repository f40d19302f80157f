"""From a click or a form back to the value that resumes the run.

The reference a person sends (an option index, a button name) is looked up in the stored
interaction, and the result is checked against the stored `response_schema`; nothing the client
sent is used as the answer itself, except text typed where the schema asks for text.
"""

from __future__ import annotations

from typing import Any

from state import CorruptRecordError, InteractionRecord, approval_of

from ._choices import Choices, choices_of, is_boolean
from ._elicit import (
    ELICITATION,
    accepted,
    elicit_choices,
    plain_answer,
    requested_schema,
    stored_choices,
)
from ._errors import InvalidAnswer
from ._form import (
    Field,
    FieldError,
    InputValue,
    form_fields,
    parse_index,
    parse_text,
    read_field,
    selected_indexes,
)
from ._ids import (
    ACTION_APPROVE,
    ACTION_CONFIRM,
    CALLBACK_DENY_MODAL,
    CALLBACK_EDIT_MODAL,
    block_id,
)
from ._payloads import CardAction, ModalSubmission
from ._validate import describe, schema_errors, validate

__all__ = [
    "accepts_text_reply",
    "answer_from_submission",
    "answer_from_text",
    "deny_reason_block_id",
    "page_from_action",
    "read_form",
    "resolve_answer",
]

_REASON_LIMIT = 2000


def _same_interaction(record: InteractionRecord, interaction_id: str) -> None:
    if interaction_id != record.interaction_id:
        raise InvalidAnswer("This control belongs to a different request.")


def _stored_choices(record: InteractionRecord, *, multiple: bool) -> Choices:
    choices = stored_choices(record)
    if choices is None or choices.multiple != multiple:
        raise InvalidAnswer("This request has no such options.")
    return choices


def _whole_field(choices: Choices) -> Field:
    return Field(
        block_id="",
        label="",
        control="multi_select" if choices.multiple else "select",
        required=True,
        schema={},
        key=None,
        choices=choices,
        span=range(len(choices.values)),
    )


def _picked(choices: Choices, references: tuple[str, ...]) -> list[int]:
    try:
        return selected_indexes(_whole_field(choices), references)
    except FieldError:
        raise InvalidAnswer("That option is not one of this request's options.") from None


def resolve_answer(record: InteractionRecord, action: CardAction) -> Any:
    """The stored value a card click stands for, checked against the stored schema."""
    _same_interaction(record, action.interaction_id)
    if action.intent != "answer":
        raise InvalidAnswer(f"`{action.action}` does not answer a request.")
    answer: Any
    match action.action:
        case "hb:approve" | "hb:deny":
            if record.kind != "approval":
                raise InvalidAnswer("This request is not an approval.")
            answer = action.action == ACTION_APPROVE
        case "hb:grant":
            answer = {"approved": True, "grant": _offered_grant(record, action.value)}
        case "hb:confirm" | "hb:cancel":
            if not is_boolean(record):
                raise InvalidAnswer("This request is not a yes/no question.")
            answer = action.action == ACTION_CONFIRM
        case "hb:option" | "hb:select":
            choices = _stored_choices(record, multiple=False)
            if action.value is None:
                raise InvalidAnswer("Choose one of the options.")
            [index] = _picked(choices, (action.value,))
            answer = choices.values[index]
            if record.kind == ELICITATION:
                answer = accepted(record, answer)
        case "hb:elicit":
            if record.kind != ELICITATION:
                raise InvalidAnswer("This request is not an MCP server's question.")
            answer = plain_answer(record, action.value)
        case "hb:submit":
            choices = _stored_choices(record, multiple=True)
            indexes = _picked(choices, action.selected)
            if not indexes:
                raise InvalidAnswer("Choose at least one option, then Submit.")
            answer = [choices.values[index] for index in sorted(indexes)]
        case _:
            raise InvalidAnswer(f"`{action.action}` does not answer a request.")
    validate(record.response_schema, answer)
    return answer


def _offered_grant(record: InteractionRecord, scope: str | None) -> str:
    """The grant scope a click asks for, when the request's own rule offers it."""
    if record.kind != "approval":
        raise InvalidAnswer("This request is not an approval.")
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        raise InvalidAnswer("This request's approval rule cannot be read.") from None
    if rule is None or rule.count != 1 or scope is None or scope not in rule.grants:
        raise InvalidAnswer("This request offers no such standing grant.")
    if scope == "thread" and not record.thread_ts:
        raise InvalidAnswer("This request is not in a thread, so it cannot grant one.")
    return scope


def page_from_action(record: InteractionRecord, action: CardAction) -> int:
    """The page of options an `hb:more` click asks for, checked against the stored options."""
    _same_interaction(record, action.interaction_id)
    choices = stored_choices(record)
    page = parse_index(action.value or "")
    if choices is None or page is None or page >= choices.pages:
        raise InvalidAnswer("There is no such page of options.")
    return page


def deny_reason_block_id(record: InteractionRecord) -> str:
    """The block id of the reason input in the deny modal."""
    return block_id(record.interaction_id, "reason")


def _deny_answer(record: InteractionRecord, submission: ModalSubmission) -> dict[str, Any]:
    if record.kind != "approval":
        raise InvalidAnswer("This request is not an approval.")
    reason_block = deny_reason_block_id(record)
    entered = submission.values.get(reason_block)
    reason = (entered.text or "").strip() if entered else ""
    if not reason:
        raise InvalidAnswer("Enter a reason.", errors={reason_block: "Enter a reason"})
    if len(reason) > _REASON_LIMIT:
        message = f"Keep it under {_REASON_LIMIT} characters"
        raise InvalidAnswer(message, errors={reason_block: message})
    answer = {"approved": False, "reason": reason}
    validate(record.response_schema, answer)
    return answer


def answer_from_submission(record: InteractionRecord, submission: ModalSubmission) -> Any:
    """The answer a submitted modal gives, or `InvalidAnswer` with inline `errors` by block id."""
    _same_interaction(record, submission.interaction_id)
    if submission.callback_id == CALLBACK_DENY_MODAL:
        return _deny_answer(record, submission)
    if submission.callback_id == CALLBACK_EDIT_MODAL:
        # Imported here: the edit form reads itself back with `read_form`, from this module.
        from ._edit import edited_arguments

        return edited_arguments(record, submission)
    if record.kind == "approval":
        raise InvalidAnswer("An approval is answered with its buttons.")
    fields = form_fields(record)
    if record.kind == ELICITATION:
        # Checked against the server's own schema first, so each error sits by its field.
        picked = elicit_choices(record) is not None
        schema = None if picked else requested_schema(record)
        answer = accepted(record, read_form(fields, submission.values, schema))
        validate(record.response_schema, answer)
        return answer
    return read_form(fields, submission.values, record.response_schema)


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


def accepts_text_reply(record: InteractionRecord) -> bool:
    """True when a plain reply in the thread can answer `record` (a free-text question)."""
    if record.kind in ("approval", "confirm", ELICITATION) or choices_of(record) is not None:
        return False
    fields = form_fields(record)
    typeable = ("text", "integer", "number", "date")
    return len(fields) == 1 and fields[0].key is None and fields[0].control in typeable


def answer_from_text(record: InteractionRecord, text: str) -> Any:
    """The answer a thread reply gives to a free-text question; `InvalidAnswer` if it cannot."""
    if not accepts_text_reply(record):
        raise InvalidAnswer("This request is answered with its buttons or form, not a reply.")
    if not text.strip():
        raise InvalidAnswer("The reply is empty.")
    try:
        answer = parse_text(form_fields(record)[0].control, text)
    except FieldError as exc:
        raise InvalidAnswer(str(exc)) from None
    validate(record.response_schema, answer)
    return answer
