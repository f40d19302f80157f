"""What a request is about, drawn the same way on a pending, answered or closed card."""

from __future__ import annotations

from typing import Any, Final, assert_never

from state import InteractionRecord, is_approval, kind_of

from ._elicit import elicitation_blocks
from ._kit import HEADER_LIMIT, SECTION_LIMIT, header, section
from ._text import cut_mrkdwn, inline_code, json_code_block, mention, to_display

__all__ = ["fallback", "main_text", "summary_blocks"]

_FIELD_LIMIT: Final = 2000
_MAX_FIELDS: Final = 10
_TOOL_LIMIT: Final = 200
_FALLBACK_LIMIT: Final = 300
# The payload keys that usually hold the sentence a person should read first.
_TEXT_KEYS: Final = ("question", "prompt", "message", "text", "action", "title", "description")


def _title(record: InteractionRecord) -> str:
    # One title for every state of the card: only its status line changes once it is settled,
    # so a person recognises the card they saw pending (and Slack's notification text matches).
    match kind_of(record):
        case "approval":
            return "Approval request"
        case "confirm":
            return "Confirmation"
        case "ask_user" | "ask_user_multi":
            return "Question"
        case "elicitation":
            return "Question from an MCP server"
        case "custom":
            words = record.kind.replace("_", " ").strip() or "input"
            return f"Request: {words}"
        case unreachable:
            assert_never(unreachable)


def main_text(record: InteractionRecord) -> tuple[str | None, str | None]:
    """`(key, text)` of the sentence the payload asks, if any."""
    keys = ("tool",) if is_approval(record) else _TEXT_KEYS
    for key in keys:
        value = record.payload.get(key)
        if isinstance(value, str) and value.strip():
            return key, value
    return None, None


def _approval_blocks(record: InteractionRecord) -> list[dict[str, Any]]:
    tool = to_display(record.payload.get("tool", "?"))
    lines = f"*Tool:* {inline_code(tool, _TOOL_LIMIT)}"
    # An MCP server's tool: which server, its own name there, and why it waits for approval.
    server, remote = record.payload.get("server"), record.payload.get("server_tool")
    if isinstance(server, str) and isinstance(remote, str):
        lines += (
            f"\n*MCP server:* {inline_code(to_display(server), _TOOL_LIMIT)}"
            f" (tool {inline_code(to_display(remote), _TOOL_LIMIT)})"
        )
    why = record.payload.get("gated_because")
    if isinstance(why, str):
        lines += f"\n*Needs approval:* {cut_mrkdwn(to_display(why), 200)}"
    lines += f"\n*Requested by:* {mention(record.requester)}"
    arguments = record.payload.get("arguments")
    label = "*Arguments:*\n"
    if arguments in (None, {}, []):
        args_text = f"{label}_none_"
    else:
        args_text = label + json_code_block(arguments, SECTION_LIMIT - len(label))
    return [section(lines), section(args_text)]


def _payload_rest(record: InteractionRecord, skip: str | None) -> list[dict[str, Any]]:
    hidden = {skip, "options"} if record.kind.startswith("ask_user") else {skip}
    rest = {key: value for key, value in record.payload.items() if key not in hidden}
    if not rest:
        return []
    scalar = all(
        value is None or isinstance(value, str | int | float | bool) for value in rest.values()
    )
    if scalar and len(rest) <= _MAX_FIELDS:
        fields = [
            {
                "type": "mrkdwn",
                "text": f"*{cut_mrkdwn(str(key), 100)}*\n"
                + cut_mrkdwn(to_display(value), _FIELD_LIMIT - 110),
            }
            for key, value in rest.items()
        ]
        return [{"type": "section", "fields": fields}]
    return [section(json_code_block(rest, SECTION_LIMIT))]


def summary_blocks(record: InteractionRecord) -> list[dict[str, Any]]:
    """Header and content of the card, without controls or status (at most 3 blocks); the same
    whether the card is pending, answered or closed."""
    blocks = [header(_title(record))]
    kind = kind_of(record)
    match kind:
        case "approval":
            return blocks + _approval_blocks(record)
        case "elicitation":
            return blocks + elicitation_blocks(record)
        case "confirm" | "ask_user" | "ask_user_multi" | "custom":
            key, text = main_text(record)
            if text is not None:
                blocks.append(section(cut_mrkdwn(text, SECTION_LIMIT)))
            if kind != "custom" and text is not None:
                return blocks
            return blocks + _payload_rest(record, key)
        case unreachable:
            assert_never(unreachable)


def fallback(record: InteractionRecord, suffix: str = "") -> str:
    """The plain `text` of the message, which notifications show; `suffix` is safe mrkdwn."""
    _, text = main_text(record)
    title = cut_mrkdwn(_title(record), HEADER_LIMIT)
    if is_approval(record):
        tool = to_display(record.payload.get("tool", "?"))
        subject = inline_code(tool, _TOOL_LIMIT)
    else:
        subject = cut_mrkdwn(text or "", _FALLBACK_LIMIT)
    return (f"{title}: {subject}" if subject else title) + suffix
