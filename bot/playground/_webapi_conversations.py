"""The Web API's reads of conversations and people: `conversations.info`, `.members` (paged by
cursor) and `.replies`, `usergroups.users.list` and `users.info`, each showing only what the
bot may see, with the scope of the conversation's kind."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from ._webapi_args import Handler, _ApiError, _ScopeMissing, channel_arg
from ._workspace_model import Channel, Workspace

__all__ = ["CONVERSATIONS_METHODS"]

_MEMBERS_LIMIT = 1000
"""The most members `conversations.members` returns per page (its `limit` defaults to 100)."""


async def _conversations_replies(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel = channel_arg(ws, args)
    ts = str(args.get("ts") or "")
    if ws.message(channel, ts) is None:
        raise _ApiError("thread_not_found")
    return {"messages": [m.to_api() for m in ws.thread(channel, ts)], "has_more": False}


def _visible_channel(ws: Workspace, args: Mapping[str, Any]) -> Channel:
    """The channel `args` names, as the bot may read it: a private channel (or a DM, a
    group DM) the bot is not in is `channel_not_found`, as Slack answers; reading one
    needs the scope of its kind (`missing_scope` otherwise)."""
    channel = ws.channels[channel_arg(ws, args)]
    private = channel.is_private or channel.is_im or channel.is_mpim
    if private and ws.bot_user_id not in ws.channel_members(channel.id):
        raise _ApiError("channel_not_found")
    needed = (
        "im:read"
        if channel.is_im
        else "mpim:read"
        if channel.is_mpim
        else "groups:read"
        if channel.is_private
        else "channels:read"
    )
    if needed not in ws.scopes:
        raise _ScopeMissing(needed)
    return channel


async def _conversations_info(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel = _visible_channel(ws, args)
    private = channel.is_private or channel.is_im or channel.is_mpim
    info: dict[str, Any] = {
        "id": channel.id,
        "is_channel": not (channel.is_im or channel.is_mpim or channel.is_private),
        "is_group": channel.is_private,
        "is_im": channel.is_im,
        "is_mpim": channel.is_mpim,
        "is_private": private,
    }
    if channel.is_im:
        info["user"] = channel.im_user
    else:
        info["name"] = channel.name
    return {"channel": info}


async def _conversations_members(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """One page of the channel's members: `limit` (100 by default, at most 1000) from the
    `cursor` of the page before; `next_cursor` is empty on the last page."""
    channel = _visible_channel(ws, args)
    members = ws.channel_members(channel.id)
    try:
        limit = int(args.get("limit") or 100)
    except (TypeError, ValueError):
        raise _ApiError("invalid_limit") from None
    if not 1 <= limit <= _MEMBERS_LIMIT:
        raise _ApiError("invalid_limit")
    start = 0
    if args.get("cursor"):
        try:
            start = members.index(_from_cursor(str(args["cursor"])))
        except ValueError:
            raise _ApiError("invalid_cursor") from None
    page = members[start : start + limit]
    rest = members[start + limit :]
    next_cursor = _to_cursor(rest[0]) if rest else ""
    return {"members": page, "response_metadata": {"next_cursor": next_cursor}}


async def _usergroups_users_list(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    group = str(args.get("usergroup") or "")
    if group not in ws.usergroups:
        raise _ApiError("no_such_subteam")
    return {"users": list(ws.usergroups[group])}


async def _users_info(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    user = ws.users.get(str(args.get("user") or ""))
    if user is None:
        raise _ApiError("user_not_found")
    return {
        "user": {
            "id": user.id,
            "team_id": ws.team_id,
            "name": user.name,
            "real_name": user.name.title(),
            "is_bot": user.is_bot,
            "profile": {"display_name": user.name, "real_name": user.name.title()},
        }
    }


def _to_cursor(user: str) -> str:
    """Slack's cursors are base64 of where the next page starts (`user:U0…`)."""
    return base64.b64encode(f"user:{user}".encode()).decode()


def _from_cursor(cursor: str) -> str:
    try:
        decoded = base64.b64decode(cursor.encode(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError(cursor) from None
    if not decoded.startswith("user:"):
        raise ValueError(cursor)
    return decoded.removeprefix("user:")


CONVERSATIONS_METHODS: dict[str, Handler] = {
    "conversations.info": _conversations_info,
    "conversations.members": _conversations_members,
    "conversations.replies": _conversations_replies,
    "usergroups.users.list": _usergroups_users_list,
    "users.info": _users_info,
}
"""Each method's handler, by the method's name."""
