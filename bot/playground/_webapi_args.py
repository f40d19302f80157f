"""How LocalSlack's Web API reads and checks a call's arguments, as Slack does: from a query
string, a form or a JSON body; the conversation, message and text they name; and the errors
(`_ApiError`, `_ScopeMissing`) a method answers with when they do not hold.

Those two are private, shared by the `_webapi*` modules only: they are how LocalSlack plays
Slack's answers, not handback's errors (`bot/_errors.py` draws those)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from ._limits import check_message
from ._workspace_model import Message, Workspace

__all__ = [
    "Handler",
    "channel_arg",
    "channel_of",
    "json_arg",
    "message_arg",
    "postable",
    "read_args",
    "text_and_blocks",
    "thread_ts",
]

Handler = Callable[[Workspace, dict[str, Any]], Awaitable[dict[str, Any]]]
"""One Web API method: what it answers (besides `ok`) to a call with these arguments."""


class _ApiError(Exception):
    """Slack's answer `{"ok": false, "error": code}` to a call."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class _ScopeMissing(Exception):
    """`missing_scope` found in a handler (the scope depends on the conversation's kind)."""

    def __init__(self, needed: str) -> None:
        super().__init__(needed)
        self.needed = needed


async def read_args(request: web.Request) -> dict[str, Any]:
    """Arguments from the query string, a form body or a JSON body, as slack_sdk sends them."""
    args: dict[str, Any] = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            loaded = await request.json()
            if isinstance(loaded, dict):
                args.update(loaded)
        else:
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
    return args


def channel_arg(ws: Workspace, args: Mapping[str, Any], key: str = "channel") -> str:
    channel = str(args.get(key) or "")
    if channel not in ws.channels:
        raise _ApiError("channel_not_found")
    return channel


def postable(ws: Workspace, args: Mapping[str, Any], key: str = "channel") -> str:
    """The channel `args` names, if the bot may post in it: Slack answers `not_in_channel`
    in a channel the bot is not a member of (`channel_not_found` when it is private)."""
    channel = channel_arg(ws, args, key)
    if ws.bot_user_id not in ws.channel_members(channel):
        found = ws.channels[channel]
        private = found.is_private or found.is_im or found.is_mpim
        raise _ApiError("channel_not_found" if private else "not_in_channel")
    return channel


def message_arg(ws: Workspace, args: Mapping[str, Any], ts_key: str) -> Message:
    """The message `channel` and `ts_key` name."""
    channel = channel_arg(ws, args)
    message = ws.message(channel, str(args.get(ts_key) or ""))
    if message is None:
        raise _ApiError("message_not_found")
    return message


def json_arg(args: Mapping[str, Any], key: str) -> Any:
    value = args.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise _ApiError("invalid_arguments") from None
    return value


def thread_ts(args: Mapping[str, Any]) -> str | None:
    return str(args["thread_ts"]) if args.get("thread_ts") else None


def text_and_blocks(args: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    blocks = json_arg(args, "blocks") or []
    check_message(blocks)
    text = str(args.get("text") or "")
    if not text and not blocks:
        raise _ApiError("no_text")
    return text, blocks


def channel_of(args: Mapping[str, Any]) -> str | None:
    return str(args.get("channel") or args.get("channel_id") or "") or None
