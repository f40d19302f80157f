"""The Block Kit blocks every card is made of, with Slack's limits for them."""

from __future__ import annotations

from typing import Any, Final

from ._text import plain

__all__ = ["HEADER_LIMIT", "SECTION_LIMIT", "context", "header", "section"]

SECTION_LIMIT: Final = 3000
HEADER_LIMIT: Final = 150


def section(text: str) -> dict[str, Any]:
    """A mrkdwn section; `text` must already be escaped and within `SECTION_LIMIT`."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def header(text: str) -> dict[str, Any]:
    return {"type": "header", "text": plain(text, HEADER_LIMIT)}
