"""How far an approval that needs several approvers got: the line its card shows."""

from __future__ import annotations

from collections.abc import Sequence

from state import CorruptRecordError, InteractionRecord, approval_of

from ._text import mention

__all__ = ["approvers_needed", "names", "progress_line"]


def approvers_needed(record: InteractionRecord) -> int:
    """Distinct approvers the record's rule asks for: 1 for a question, an old approval, or a
    rule that does not read back (the click path refuses that one; the card just leaves the
    count out)."""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return 1
    return 1 if rule is None else rule.count


def names(users: Sequence[str]) -> str:
    """Mentions joined as a sentence lists people: "@a", "@a and @b", "@a, @b and @c"."""
    shown = [mention(user) for user in users]
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def progress_line(record: InteractionRecord) -> str | None:
    """ "1 of 2 approved: @bob" (safe mrkdwn) for a pending approval that needs several
    approvers, or None when it needs one."""
    needed = approvers_needed(record)
    if needed <= 1:
        return None
    if not record.votes:
        return f"Needs {needed} different approvers; none so far."
    voters = names([vote.user for vote in record.votes])
    return f"*{len(record.votes)} of {needed} approved:* {voters}"
