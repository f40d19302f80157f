"""What people read about standing grants: the card's grant buttons and the line saying what
they cover, the line under an approval that gave one, and the thread notice for a call that ran
under one instead of showing a card."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from state import Approval, Grant, InteractionRecord

from ._text import date_token, inline_code, mention, to_display

__all__ = [
    "grant_button_label",
    "grant_given_line",
    "grant_terms",
    "grant_used_notice",
    "grantable",
]

_TOOL_LIMIT = 80
_VALUE_LIMIT = 60


def grantable(record: InteractionRecord) -> bool:
    """Whether a grant given on `record` could be bound to what it asks: the tool's place in
    the agent tree and who asked (the app gives none otherwise, so the card offers none)."""
    return bool(record.runnable_path) and record.requester is not None


def grant_button_label(scope: str, length: str, rule: Approval) -> str:
    """The button, in plain text (Slack shows no mentions there): "Approve for this thread, for
    the requester (1 h)"; `grant_terms` names the people."""
    others = len(rule.grant_requesters)
    who = "the requester" if not others else f"the requester and {others} more"
    return f"Approve for this {scope}, for {who} ({length})"


def grant_terms(record: InteractionRecord, rule: Approval, length: str) -> str:
    """The line under the grant buttons saying exactly what a grant would cover."""
    people = [record.requester, *(u for u in rule.grant_requesters if u != record.requester)]
    who = ", ".join(mention(user) for user in people)
    tool = inline_code(str(record.payload.get("tool", "")), _TOOL_LIMIT)
    scopes = " or ".join(f"this {scope}" for scope in rule.grants)
    pinned = _pinned_text(record, rule.grant_arguments)
    return (
        f"A standing grant approves, for {length}, later {tool} calls of this same tool in "
        f"{scopes}, requested by {who}{pinned}."
    )


def _pinned_text(record: InteractionRecord, names: Sequence[str]) -> str:
    if not names:
        return ""
    arguments: Any = record.payload.get("arguments")
    values = arguments if isinstance(arguments, dict) else {}
    said = ", ".join(
        f"{inline_code(name, _VALUE_LIMIT)} = "
        f"{inline_code(to_display(values.get(name, '')), _VALUE_LIMIT)}"
        for name in names
    )
    return f", only with {said}"


def grant_given_line(scope: str, until: float) -> str:
    """Appended to "Approved by @bob": the grant that came with that approval."""
    return f", and for the rest of this {scope} until {date_token(until)} (standing grant)"


def grant_used_notice(grant: Grant, tool: str) -> str:
    """Posted in the thread where a call is approved under `grant`, so nobody has to wonder why
    no card asked them."""
    return (
        f":unlock: {inline_code(tool, _TOOL_LIMIT)} runs without a card: approved under "
        f"{mention(grant.granted_by)}'s standing grant for this {grant.scope} "
        f"(until {date_token(grant.expires_at)})."
    )
