"""The card posted for a pending interaction: what is asked, and the controls that answer it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal, TypedDict

from state import (
    Approval,
    CorruptRecordError,
    InteractionRecord,
    approval_of,
    is_approval,
    is_elicitation,
    kind_of,
)

from ._answers import accepts_text_reply
from ._approvers import ANYONE, approver_mentions, escalated_to
from ._choices import OPTION_LIMIT, PAGE_SIZE, Choices, choices_of, is_boolean
from ._edit import can_edit
from ._elicit import elicit_choices, is_url_mode
from ._grant import grant_button_label, grant_terms, grantable
from ._ids import (
    ACTION_ANSWER,
    ACTION_APPROVE,
    ACTION_CANCEL,
    ACTION_CONFIRM,
    ACTION_DENY,
    ACTION_DENY_REASON,
    ACTION_EDIT,
    ACTION_ELICIT,
    ACTION_GRANT,
    ACTION_LINK,
    ACTION_MORE,
    ACTION_MULTI,
    ACTION_OPTION,
    ACTION_SELECT,
    ACTION_SUBMIT,
    block_id,
    suffixed,
)
from ._kit import SECTION_LIMIT, context, section
from ._summary import fallback, summary_blocks
from ._text import cut_mrkdwn, date_token, mention, plain, slack_len
from ._votes import progress_line

__all__ = ["Message", "controls", "render_card"]

_BUTTON_LIMIT: Final = 75
_PLACEHOLDER_LIMIT: Final = 150
_LISTED_OPTION_LIMIT: Final = 300
_MAX_LIST_SECTIONS: Final = 5


class Message(TypedDict):
    """Arguments for `chat.postMessage` / `chat.update`: a fallback `text` and the blocks."""

    text: str
    blocks: list[dict[str, Any]]


def _button(
    text: str, action_id: str, value: str, style: Literal["primary", "danger"] | None = None
) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": plain(text, _BUTTON_LIMIT),
        "value": value,
    }
    if style is not None:
        button["style"] = style
    return button


def _actions(
    record: InteractionRecord, part: str, elements: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "type": "actions",
        "block_id": block_id(record.interaction_id, part),
        "elements": elements,
    }


def _option(choices: Choices, index: int, *, numbered: bool) -> dict[str, Any]:
    return {
        "text": plain(choices.label(index, numbered=numbered), OPTION_LIMIT),
        "value": str(index),
    }


def _full_list(choices: Choices, indexes: range) -> list[dict[str, Any]]:
    """The options whose labels had to be cut, in full (within limits), under the controls."""
    lines = [
        f"*{index + 1}.* {cut_mrkdwn(choices.labels[index], _LISTED_OPTION_LIMIT)}"
        for index in indexes
        if choices.is_cut(index)
    ]
    sections: list[str] = []
    current = ""
    shown = 0
    for line in lines:
        candidate = f"{current}\n{line}" if current else line
        if slack_len(candidate) <= SECTION_LIMIT:
            current = candidate
            shown += 1
            continue
        if len(sections) + 1 == _MAX_LIST_SECTIONS:
            break
        sections.append(current)
        current = line
        shown += 1
    if current:
        sections.append(current)
    blocks = [section(text) for text in sections]
    if shown < len(lines):
        blocks.append(context(f"{len(lines) - shown} more long options are not spelled out here."))
    return blocks


def _single_choice(record: InteractionRecord, choices: Choices, page: int) -> list[dict[str, Any]]:
    if choices.as_buttons:
        buttons = [
            _button(label, suffixed(ACTION_OPTION, index), str(index))
            for index, label in enumerate(choices.labels)
        ]
        return [_actions(record, "o", buttons)]
    page = choices.clamp(page)
    indexes = choices.page_range(page)
    numbered = choices.numbered(indexes)
    count = len(choices.values)
    select = {
        "type": "static_select",
        "action_id": ACTION_SELECT,
        "placeholder": plain("Choose an option", _PLACEHOLDER_LIMIT),
        "options": [_option(choices, index, numbered=numbered) for index in indexes],
    }
    elements: list[dict[str, Any]] = [select]
    blocks: list[dict[str, Any]] = []
    if choices.pages > 1:
        if page > 0:
            elements.append(_button("◀ Previous", suffixed(ACTION_MORE, page - 1), str(page - 1)))
        if page + 1 < choices.pages:
            later = choices.page_range(page + 1)
            elements.append(
                _button(
                    f"Next: {later.start + 1}–{later.stop} ▶",
                    suffixed(ACTION_MORE, page + 1),
                    str(page + 1),
                )
            )
        elements.append(_button(f"Search all {count} options…", ACTION_ANSWER, "search"))
    blocks.append(_actions(record, f"s{page}", elements))
    if choices.pages > 1:
        blocks.append(context(f"Showing options {indexes.start + 1}–{indexes.stop} of {count}."))
    if numbered:
        blocks += _full_list(choices, indexes)
    return blocks


def _multi_choice(record: InteractionRecord, choices: Choices) -> list[dict[str, Any]]:
    count = len(choices.values)
    if count > PAGE_SIZE:
        button = _button(f"Choose from {count} options…", ACTION_ANSWER, "form", "primary")
        return [_actions(record, "a", [button])]
    indexes = range(count)
    numbered = choices.numbered(indexes)
    options = [_option(choices, index, numbered=numbered) for index in indexes]
    picker: dict[str, Any]
    if choices.as_checkboxes:
        picker = {"type": "checkboxes", "action_id": ACTION_MULTI, "options": options}
    else:
        picker = {
            "type": "multi_static_select",
            "action_id": ACTION_MULTI,
            "placeholder": plain("Choose options", _PLACEHOLDER_LIMIT),
            "options": options,
        }
    submit = _button("Submit", ACTION_SUBMIT, "submit", "primary")
    blocks = [_actions(record, "m", [picker, submit])]
    if numbered:
        blocks += _full_list(choices, indexes)
    return blocks


def _duration(seconds: float) -> str:
    """A grant's length as a button says it: `30 min`, `1 h`, `1.5 h`, `2 d`."""
    if seconds < 3600:
        return f"{max(1, round(seconds / 60))} min"
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600, 1):g} h"
    return f"{round(seconds / 86400, 1):g} d"


def _grant_rule(record: InteractionRecord) -> Approval | None:
    """The rule when the card offers standing grants: one approver, scopes offered, and a
    request a grant can be bound to; None otherwise (also for a rule that cannot be read: the
    gate refuses every answer to it anyway)."""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return None
    if rule is None or rule.count != 1 or not rule.grants or not grantable(record):
        return None
    return rule


def _grant_buttons(record: InteractionRecord) -> list[dict[str, Any]]:
    """ "Approve for this thread, for the requester (1 h)" and the like, for the scopes the
    rule offers."""
    rule = _grant_rule(record)
    if rule is None:
        return []
    length = _duration(rule.grant_ttl)
    return [
        _button(grant_button_label(scope, length, rule), suffixed(ACTION_GRANT, scope), scope)
        for scope in rule.grants
        if scope != "thread" or record.thread_ts
    ]


def _grant_terms(record: InteractionRecord) -> list[dict[str, Any]]:
    """The line under the buttons saying what a grant covers, when the card offers one."""
    rule = _grant_rule(record)
    if rule is None or not _grant_buttons(record):
        return []
    return [context(grant_terms(record, rule, _duration(rule.grant_ttl)))]


def _elicitation_controls(record: InteractionRecord, page: int) -> list[dict[str, Any]]:
    """Accept by the form (its buttons, select or modal), or by Done once the link was used;
    Decline and Cancel reach the server as themselves."""
    ends = [
        _button("Decline", suffixed(ACTION_ELICIT, "d"), "decline"),
        _button("Cancel", suffixed(ACTION_ELICIT, "c"), "cancel"),
    ]
    if is_url_mode(record):
        link = {
            "type": "button",
            "action_id": ACTION_LINK,
            "text": plain("Open link", _BUTTON_LIMIT),
            "url": str(record.payload.get("url", "")),
            "value": "open",
        }
        done = _button("Done", suffixed(ACTION_ELICIT, "a"), "done", "primary")
        return [_actions(record, "a", [link, done, *ends])]
    picked = elicit_choices(record)
    if picked is not None:
        return [*_single_choice(record, picked[1], page), _actions(record, "e", ends)]
    answer = _button("Answer…", ACTION_ANSWER, "form", "primary")
    return [_actions(record, "a", [answer, *ends])]


def _controls(record: InteractionRecord, page: int) -> list[dict[str, Any]]:
    if is_elicitation(record):
        return _elicitation_controls(record, page)
    if is_approval(record):
        buttons = [
            _button("Approve", ACTION_APPROVE, "approve", "primary"),
            *_grant_buttons(record),
        ]
        if can_edit(record):
            buttons.append(_button("Edit and approve…", ACTION_EDIT, "edit"))
        buttons += [
            _button("Deny", ACTION_DENY, "deny", "danger"),
            _button("Deny with reason…", ACTION_DENY_REASON, "deny_reason"),
        ]
        progress = progress_line(record)
        shown = [] if progress is None else [section(progress)]
        return [*shown, _actions(record, "a", buttons), *_grant_terms(record)]
    if is_boolean(record):
        yes, no = ("Confirm", "Cancel") if kind_of(record) == "confirm" else ("Yes", "No")
        buttons = [
            _button(yes, ACTION_CONFIRM, "confirm", "primary"),
            _button(no, ACTION_CANCEL, "cancel"),
        ]
        return [_actions(record, "a", buttons)]
    choices = choices_of(record)
    if choices is not None:
        if choices.multiple:
            return _multi_choice(record, choices)
        return _single_choice(record, choices, page)
    return [_actions(record, "a", [_button("Answer", ACTION_ANSWER, "form", "primary")])]


def _footer(record: InteractionRecord, approvers: Sequence[str] | None) -> list[dict[str, Any]]:
    parts = ["Or reply in this thread."] if accepts_text_reply(record) else []
    if is_approval(record) and approvers is not None:
        parts.append(
            "Anyone here may approve, except whoever asked"
            if tuple(approvers) == (ANYONE,)
            else f"Approvers: {approver_mentions(approvers)}"
            if approvers
            else "Nobody may approve this yet: no approver rule is set"
        )
    if record.requester and not is_approval(record):
        parts.append(f"Requested by {mention(record.requester)}")
    if added := escalated_to(record):
        parts.append(f"Escalated to {added}")
    if record.expires_at > 0:
        parts.append(f"Expires {date_token(record.expires_at)}")
    return [context(" · ".join(parts))] if parts else []


def render_card(
    record: InteractionRecord, *, page: int = 0, approvers: Sequence[str] | None = None
) -> Message:
    """The card for a pending interaction; `page` picks which hundred options a long list shows,
    and `approvers` (users and user groups, or `ANYONE`; empty: nobody) who may approve it,
    as the app's policy resolves them (the rule's list, the tool's or the global one), for an
    approval."""
    blocks = summary_blocks(record) + _controls(record, page) + _footer(record, approvers)
    return {"text": fallback(record), "blocks": blocks}


def controls(record: InteractionRecord, page: int = 0) -> list[dict[str, Any]]:
    """The card's controls alone, for other surfaces that answer the same interaction (App
    Home): the same block and action ids, so a click there is claimed like one on the card."""
    return _controls(record, page)
