"""The card once its interaction is settled: answered, expired, superseded or cancelled."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from state import CorruptRecordError, InteractionRecord, approval_of, is_approval, kind_of

from ._card import Message, render_card
from ._choices import is_boolean
from ._grant import grant_given_line
from ._kit import SECTION_LIMIT, section
from ._summary import fallback, summary_blocks
from ._text import cut_mrkdwn, date_token, inline_code, json_code_block, mention, to_display
from ._votes import names

__all__ = ["approval_outcome", "render", "render_answered", "render_closed"]

_REASON_LIMIT = 1500
_EDITS_SHOWN = 8
_EDIT_VALUE_LIMIT = 80


def _when(unix: float | None) -> str:
    # No "on" before the date: Slack shows it as "today at 14:05" or "Dec 1, 2026 at 14:05", and
    # "on today at" reads oddly.
    return f" {date_token(unix)}" if unix else ""


def _approval_outcome(answer: Any) -> tuple[str, str | None]:
    """(verb, reason) of an approval answer: `True`/`False` or `{"approved", "reason"}`."""
    if isinstance(answer, dict):
        approved = answer.get("approved") is True
        reason = answer.get("reason")
        return ("Approved" if approved else "Denied"), (
            to_display(reason) if reason not in (None, "") else None
        )
    return ("Approved" if answer is True else "Denied"), None


def _grant_given(record: InteractionRecord) -> str:
    """What an approval that also gave a standing grant adds to its status line."""
    answer = record.answer
    scope = answer.get("grant") if isinstance(answer, dict) else None
    if scope not in ("thread", "channel") or record.answered_at is None:
        return ""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return ""
    if rule is None:
        return ""
    return grant_given_line(str(scope), record.answered_at + rule.grant_ttl)


def _edits(record: InteractionRecord) -> list[str]:
    """What an approver changed before approving (`hb:edit_modal`), one entry per argument.

    Only editable arguments can be in the answer (a secret-looking one is never read back from
    the form), so a changed plain value is shown; a changed object or list only by its name,
    since a secret may sit inside it."""
    answer = record.answer
    if not isinstance(answer, dict) or answer.get("approved") is not True:
        return []
    edited = answer.get("arguments")
    before = record.payload.get("arguments")
    if not isinstance(edited, dict):
        return []
    before = before if isinstance(before, dict) else {}
    changes: list[str] = []
    for key, value in edited.items():
        if key in before and before[key] == value:
            continue
        name = inline_code(to_display(key), _EDIT_VALUE_LIMIT)
        was = before.get(key)
        if isinstance(value, dict | list) or isinstance(was, dict | list):
            changes.append(f"{name} changed")
            continue
        old = inline_code(to_display(was), _EDIT_VALUE_LIMIT) if key in before else "(not set)"
        changes.append(f"{name}: {old} → {inline_code(to_display(value), _EDIT_VALUE_LIMIT)}")
    return changes


def approval_outcome(answer: Any) -> tuple[str, str | None]:
    """`(verb, reason)` of an approval answer, as the card says it ("Approved", "Denied")."""
    return _approval_outcome(answer)


def _answer_text(answer: Any, room: int) -> str:
    """The answer as readable, escaped mrkdwn within `room` characters."""
    if isinstance(answer, list) and all(isinstance(item, str) for item in answer):
        return cut_mrkdwn(", ".join(answer), room)
    if isinstance(answer, dict | list):
        return "\n" + json_code_block(answer, room - 1)
    return cut_mrkdwn(to_display(answer), room)


def _status_line(record: InteractionRecord) -> tuple[str, str]:
    """`(line for the card, short suffix for the fallback text)`, both safe mrkdwn."""
    who = mention(record.answered_by)
    when = _when(record.answered_at)
    if is_approval(record):
        verb, reason = _approval_outcome(record.answer)
        icon = "✅" if verb == "Approved" else "❌"
        voters = [vote.user for vote in record.votes]
        if verb == "Approved" and voters:
            # Two-person rule: everyone whose approval counted, in the order they came.
            who = names(voters)
        line = f"{icon} *{verb}* by {who}{when}{_grant_given(record)}"
        if verb == "Denied" and voters:
            line += f"\nApproved before that by {names(voters)}"
        edits = _edits(record)
        if edits:
            shown = ", ".join(edits[:_EDITS_SHOWN])
            more = f" and {len(edits) - _EDITS_SHOWN} more" if len(edits) > _EDITS_SHOWN else ""
            line += f"\n✏️ *Edited the arguments before approving:* {shown}{more}"
            return line, f" — approved with edits by {who}"
        if reason is not None:
            # One line: a typed line break could add a fake "Approved by" under the real status.
            flat = " ".join(part.strip() for part in reason.splitlines() if part.strip())
            line += f"\n*Reason:* {cut_mrkdwn(flat, _REASON_LIMIT)}"
        return line, f" — {verb.lower()} by {who}"
    if is_boolean(record) and isinstance(record.answer, bool):
        if kind_of(record) == "confirm":
            verb = "Confirmed" if record.answer else "Cancelled"
        else:
            verb = "Answered *yes*" if record.answer else "Answered *no*"
        icon = "✅" if record.answer else "✖️"
        return f"{icon} {verb} by {who}{when}", f" — answered by {who}"
    head = f"✅ Answered by {who}{when}: "
    line = head + _answer_text(record.answer, SECTION_LIMIT - len(head) - 50)
    return line, f" — answered by {who}"


def render_answered(record: InteractionRecord) -> Message:
    """The card after its answer: no controls, who answered what and when."""
    if record.status != "answered":
        raise ValueError(f"`render_answered` needs an answered record, got {record.status!r}")
    line, suffix = _status_line(record)
    blocks = [*summary_blocks(record), section(line)]
    return {"text": fallback(record, suffix), "blocks": blocks}


def render_closed(record: InteractionRecord) -> Message:
    """The card of an interaction that ended without an answer."""
    match record.status:
        case "expired":
            when = _when(record.expires_at)
            line = f"⌛ This request expired{when} without an answer."
            suffix = " — expired"
        case "superseded":
            line = "↪️ This request was superseded: the conversation moved on without an answer."
            suffix = " — superseded"
        case "cancelled":
            line = "🚫 This request was cancelled."
            suffix = " — cancelled"
        case "pending" | "answered":
            raise ValueError(f"`render_closed` needs a closed record, got {record.status!r}")
    blocks = [*summary_blocks(record), section(line)]
    return {"text": fallback(record, suffix), "blocks": blocks}


def render(
    record: InteractionRecord, *, page: int = 0, approvers: Sequence[str] | None = None
) -> Message:
    """The card for `record` in whatever state it is in (`approvers` as `render_card` takes
    them, for a pending one)."""
    match record.status:
        case "pending":
            return render_card(record, page=page, approvers=approvers)
        case "answered":
            return render_answered(record)
        case "expired" | "superseded" | "cancelled":
            return render_closed(record)
