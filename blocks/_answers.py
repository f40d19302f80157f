"""From a click or a form back to the value that resumes the run.

The reference a person sends (an option index, a button name) is looked up in the stored
interaction, and the result is checked against the stored `response_schema`; nothing the client
sent is used as the answer itself, except text typed where the schema asks for text.
"""

from __future__ import annotations

from typing import Any, assert_never

from state import (
    CorruptRecordError,
    InteractionRecord,
    approval_of,
    is_approval,
    is_elicitation,
    kind_of,
)

from ._choices import Choices, choices_of, is_boolean
from ._edit import edited_arguments
from ._elicit import (
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
    form_fields,
    parse_index,
    parse_text,
    selected_indexes,
)
from ._form_values import read_form
from ._ids import (
    ACTION_APPROVE,
    ACTION_CONFIRM,
    CALLBACK_DENY_MODAL,
    CALLBACK_EDIT_MODAL,
)
from ._modal import deny_reason_block_id
from ._payloads import CardAction, ModalSubmission
from ._validate import validate

__all__ = [
    "accepts_text_reply",
    "answer_from_submission",
    "answer_from_text",
    "page_from_action",
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
            if not is_approval(record):
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
            if is_elicitation(record):
                answer = accepted(record, answer)
        case "hb:elicit":
            if not is_elicitation(record):
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
    if not is_approval(record):
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


def _deny_answer(record: InteractionRecord, submission: ModalSubmission) -> dict[str, Any]:
    if not is_approval(record):
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
        return edited_arguments(record, submission)
    if is_approval(record):
        raise InvalidAnswer("An approval is answered with its buttons.")
    fields = form_fields(record)
    if is_elicitation(record):
        # Checked against the server's own schema first, so each error sits by its field.
        picked = elicit_choices(record) is not None
        schema = None if picked else requested_schema(record)
        answer = accepted(record, read_form(fields, submission.values, schema))
        validate(record.response_schema, answer)
        return answer
    return read_form(fields, submission.values, record.response_schema)


def accepts_text_reply(record: InteractionRecord) -> bool:
    """True when a plain reply in the thread can answer `record` (a free-text question)."""
    match kind_of(record):
        case "approval" | "confirm" | "elicitation":
            return False  # Answered with their buttons (or form) only.
        case "ask_user" | "ask_user_multi" | "custom":
            if choices_of(record) is not None:
                return False
        case unreachable:
            assert_never(unreachable)
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
