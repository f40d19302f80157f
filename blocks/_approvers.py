"""Who may approve, as Slack shows it: mentions of users and user groups, and the card's note
that says who may approve now or why an approval was taken back."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from state import CorruptRecordError, InteractionRecord, approval_of

from ._kit import context
from ._text import cut, escape

if TYPE_CHECKING:
    from ._card import Message

__all__ = ["ANYONE", "approver_mentions", "escalated_to", "with_note"]

ANYONE = "anyone"
"""The approvers' list that lets anyone in the channel but the requester approve
(`HANDBACK_APPROVERS=anyone`); an empty list lets nobody."""

_USER = re.compile(r"[UW][A-Z0-9]{2,30}")
_GROUP = re.compile(r"S[A-Z0-9]{2,30}")
_NOTE_LIMIT = 2000
"""A context element holds up to 3000 characters; the note stays well inside."""


def approver_mentions(approvers: Sequence[str]) -> str:
    """`<@U…>` for users and `<!subteam^S…>` for user groups, joined by commas ("" for none);
    anything else is shown as escaped text, never as a mention."""
    shown = []
    for entry in approvers:
        if entry == ANYONE:
            shown.append("anyone here but whoever asked")
        elif _USER.fullmatch(entry):
            shown.append(f"<@{entry}>")
        elif _GROUP.fullmatch(entry):
            shown.append(f"<!subteam^{entry}>")
        else:
            shown.append(escape(entry))
    return ", ".join(shown)


def escalated_to(record: InteractionRecord) -> str:
    """Mentions of whom the request's escalation added to its approvers, once the store says it
    escalated (`escalated_at`); "" before, or for a rule that does not read back."""
    if record.escalated_at is None:
        return ""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return ""
    return "" if rule is None else approver_mentions(rule.escalate_to)


def with_note(card: Message, note: str) -> Message:
    """`card` with `note` (mrkdwn we wrote) as a context line at its end."""
    noted = copy.deepcopy(card)
    noted["blocks"] = [*noted["blocks"], context(cut(note, _NOTE_LIMIT))]
    return noted
