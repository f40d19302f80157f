"""What people read about standing grants: the line under an approval that gave one, and the
thread notice for a call that ran under one instead of showing a card."""

from __future__ import annotations

from state import Grant

from ._text import date_token, inline_code, mention

__all__ = ["grant_given_line", "grant_used_notice"]

_TOOL_LIMIT = 80


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
