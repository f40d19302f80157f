"""Text for Block Kit: mrkdwn escaping, cutting to Slack's limits, mentions and dates.

Slack counts some limits in UTF-16 code units, so lengths here are measured that way: it is never
shorter than Python's code-point length, so a text that fits here fits in Slack too.
"""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime
from typing import Any, Final

__all__ = [
    "ELLIPSIS",
    "cut",
    "cut_mrkdwn",
    "date_token",
    "escape",
    "inline_code",
    "json_code_block",
    "mention",
    "plain",
    "show_hidden",
    "slack_len",
    "to_display",
]

ELLIPSIS: Final = "…"
_USER_ID = re.compile(r"[UW][A-Z0-9]{2,30}")
# A cut must not leave half an entity such as "&am" behind.
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,3}\Z")
_FENCE = "```"
# Characters that reorder or hide text (bidi controls, zero-width spaces): in what a person is
# asked to approve they could disguise a command ("Trojan Source"), and in a question, an answer
# or a reason they could make the card say something it does not, so every text shows them
# escaped. U+200D (zero-width joiner) stays: emoji sequences need it and it cannot reorder
# anything.
_HIDDEN = re.compile(
    "[\u061c\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_BACKTICK_LOOKALIKE = "\u02cb"


def show_hidden(text: str) -> str:
    """`text` with every bidi control and invisible character spelled out as `\\uXXXX`, so it
    reads in Slack exactly as it is stored; applying it twice changes nothing more."""
    return _HIDDEN.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def slack_len(text: str) -> int:
    """The length Slack sees: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _prefix_within(text: str, units: int) -> str:
    """The longest prefix of `text` that is at most `units` UTF-16 code units long."""
    if slack_len(text) <= units:
        return text
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def cut(text: str, limit: int) -> str:
    """`text` with hidden characters shown, and cut so that it ends in a visible ellipsis when
    it does not fit."""
    text = show_hidden(text)
    if slack_len(text) <= limit:
        return text
    return _prefix_within(text, limit - 1).rstrip() + ELLIPSIS


def escape(text: str) -> str:
    """Escape the three characters Slack parses in mrkdwn, so text cannot ping or link, and show
    hidden characters (`show_hidden`)."""
    return _escape_entities(show_hidden(text))


def _escape_entities(text: str) -> str:
    # Slack's mrkdwn parses exactly &, < and >; quotes are left alone.
    return html.escape(text, quote=False)


def cut_mrkdwn(raw: str, limit: int) -> str:
    """Escape `raw` for mrkdwn (`escape`) and cut the result to `limit`, never splitting an
    entity."""
    return _cut_escaped(escape(raw), limit)


def _cut_escaped(escaped: str, limit: int) -> str:
    if slack_len(escaped) <= limit:
        return escaped
    head = _PARTIAL_ENTITY.sub("", _prefix_within(escaped, limit - 1))
    return head.rstrip() + ELLIPSIS


def plain(text: str, limit: int) -> dict[str, Any]:
    """A plain_text object; Slack does not parse mentions or links in plain text."""
    shown = cut(text, limit)
    return {"type": "plain_text", "text": shown if shown.strip() else "(empty)"}


def mention(user: str | None) -> str:
    """`<@U…>` for a real user id; anything else is shown as escaped text."""
    if user is None or user == "":
        return "someone"
    if _USER_ID.fullmatch(user):
        return f"<@{user}>"
    return escape(cut(user, 80))


def date_token(unix: float) -> str:
    """A date Slack shows in the reader's time zone, with a UTC fallback."""
    try:
        seconds = int(unix)
        fallback = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, ValueError, OSError):
        # NaN, infinity or past year 9999: a card must still render.
        return "an unknown date"
    return f"<!date^{seconds}^{{date_short_pretty}} at {{time}}|{fallback}>"


def to_display(value: Any) -> str:
    """A value as a person reads it: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value, ensure_ascii=False, default=str)


def inline_code(raw: str, limit: int) -> str:
    """`raw` as one mrkdwn code span of at most `limit` characters: escaped, hidden characters
    shown, and no backtick or line break that would end the span early."""
    text = show_hidden(" ".join(raw.splitlines())).replace("`", _BACKTICK_LOOKALIKE)
    return f"`{cut_mrkdwn(text, limit - 2) or ' '}`"


def json_code_block(value: Any, limit: int) -> str:
    """`value` as pretty JSON in a mrkdwn code block, escaped and cut to `limit` overall."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str, sort_keys=False)
    # Inside JSON strings `\uXXXX` is the same character, so this only changes how it looks.
    text = show_hidden(text)
    # A fence inside the value would close the block early; a zero-width space breaks it (ours,
    # added after the hidden characters were shown, so it stays a zero-width space).
    text = text.replace(_FENCE, "`\u200b`\u200b`")
    body = _cut_escaped(_escape_entities(text), limit - 2 * len(_FENCE) - 2)
    return f"{_FENCE}\n{body}\n{_FENCE}"
