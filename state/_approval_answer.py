"""`ApprovalAnswer`: what a person's answer to an approval says, read from its JSON in one place.

An approval's answer is stored as JSON, `true` / `false` or an object (`APPROVAL_SCHEMA` in
`bot`): `{"approved": true, "reason": ..., "arguments": {...}, "grant": ..., "approvers": [...]}`.
Everything that asks whether an answer approves (the stores' vote counting, the Slack policy,
the runtime's gate) reads it with `read_approval`, so none of them is laxer than another: only
`true` itself approves, not `1` or `"yes"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ApprovalAnswer", "approves", "read_approval"]


@dataclass(frozen=True, kw_only=True)
class ApprovalAnswer:
    """A person's answer to an approval."""

    approved: bool
    reason: str | None = None
    """Why, when a person said (a denial's reason is shown to the model)."""
    edits: Any = None
    """The arguments an approver's edit gives instead (an approval only; checked by the gate,
    which refuses anything that is not an object)."""


def read_approval(answer: Any) -> ApprovalAnswer:
    """The answer as an `ApprovalAnswer`: `true`, or an object whose `approved` is `true`,
    approves; anything else denies."""
    if isinstance(answer, dict):
        approved = answer.get("approved") is True
        reason = answer.get("reason")
        return ApprovalAnswer(
            approved=approved,
            reason=reason if isinstance(reason, str) and reason else None,
            edits=answer.get("arguments") if approved else None,
        )
    return ApprovalAnswer(approved=answer is True)


def approves(answer: Any) -> bool:
    """Whether an answer approves (`read_approval(answer).approved`)."""
    return read_approval(answer).approved
