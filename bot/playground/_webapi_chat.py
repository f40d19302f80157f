"""The Web API's `chat.*` methods for plain messages (post, update, post ephemeral, delete) and
`reactions.*`, served from LocalSlack's workspace as Slack answers them."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from ._limits import limit
from ._webapi_args import (
    Handler,
    _ApiError,
    message_arg,
    postable,
    text_and_blocks,
    thread_ts,
)
from ._workspace_model import Ephemeral, Message, Workspace

__all__ = ["CHAT_METHODS"]

_UPDATE_TEXT_LIMIT = limit("chat.update text").figure
_TEXT_LIMIT = limit("message text").figure


async def _chat_post_message(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    user = str(args.get("channel") or "")
    if user in ws.users and not ws.users[user].is_bot:
        # As in Slack, a user id posts in the app's direct message with that person.
        args = {**args, "channel": ws.dm_channel(user)}
    channel = postable(ws, args)
    text, blocks = text_and_blocks(args)
    thread = thread_ts(args)
    if thread is not None and ws.message(channel, thread) is None:
        raise _ApiError("invalid_thread_ts")
    message = Message(
        channel=channel,
        ts=ws.new_ts(),
        text=text[:_TEXT_LIMIT],  # Slack truncates longer text rather than refusing it
        bot_id=ws.bot_id,
        user=ws.bot_user_id,
        thread_ts=thread,
        blocks=blocks,
    )
    ws.messages.append(message)
    await ws.publish("message", {"channel": channel, **message.to_api()})
    return {"channel": channel, "ts": message.ts, "message": message.to_api()}


async def _chat_update(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = message_arg(ws, args, "ts")
    if message.bot_id != ws.bot_id:
        raise _ApiError("cant_update_message")
    text, blocks = text_and_blocks(args)
    if len(text) > _UPDATE_TEXT_LIMIT:
        raise _ApiError("msg_too_long")
    message.text = text
    # Slack keeps the old blocks when an update leaves them out.
    if "blocks" in args:
        message.blocks = blocks
    message.edited = True
    channel = message.channel
    await ws.publish("message_updated", {"channel": channel, **message.to_api()})
    return {"channel": channel, "ts": message.ts, "text": text, "message": message.to_api()}


async def _chat_post_ephemeral(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel = postable(ws, args)
    user = str(args.get("user") or "")
    if user not in ws.users:
        # Slack's one answer for someone it cannot show the message to in this channel.
        raise _ApiError("user_not_in_channel")
    text, blocks = text_and_blocks(args)
    ephemeral = Ephemeral(
        channel=channel,
        user=user,
        text=text,
        thread_ts=thread_ts(args),
        blocks=blocks,
        message_ts=ws.new_ts(),
    )
    ws.ephemerals.append(ephemeral)
    await ws.publish("ephemeral", asdict(ephemeral))
    return {"message_ts": ephemeral.message_ts}


async def _chat_delete(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = message_arg(ws, args, "ts")
    ws.messages.remove(message)
    where = {"channel": message.channel, "ts": message.ts}
    await ws.publish("message_deleted", where)
    return where


async def _reactions_add(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = message_arg(ws, args, "timestamp")
    name = str(args.get("name") or "")
    users = message.reactions.setdefault(name, [])
    if ws.bot_user_id in users:
        raise _ApiError("already_reacted")
    users.append(ws.bot_user_id)
    await ws.publish("reaction_added", {"channel": message.channel, "ts": message.ts, "name": name})
    return {}


async def _reactions_remove(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = message_arg(ws, args, "timestamp")
    name = str(args.get("name") or "")
    users = message.reactions.get(name, [])
    if ws.bot_user_id not in users:
        raise _ApiError("no_reaction")
    users.remove(ws.bot_user_id)
    if not users:
        del message.reactions[name]
    await ws.publish(
        "reaction_removed", {"channel": message.channel, "ts": message.ts, "name": name}
    )
    return {}


CHAT_METHODS: dict[str, Handler] = {
    "chat.postMessage": _chat_post_message,
    "chat.update": _chat_update,
    "chat.postEphemeral": _chat_post_ephemeral,
    "chat.delete": _chat_delete,
    "reactions.add": _reactions_add,
    "reactions.remove": _reactions_remove,
}
"""Each method's handler, by the method's name."""
