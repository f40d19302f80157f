"""The Slack Web API methods the bot calls, served from LocalSlack's workspace: token checks,
injected failures (rate limits) and one handler per method, answering as Slack answers.

The agent methods (`agents.sessions.setStatus`, `chat.startStream` / `appendStream` /
`stopStream`) check their chunks with slack_sdk's own chunk models, and answer every call with
`workspace.agent_refusal` when it is set, as Slack answers an app not declared as an agent.
Blocks and views are checked against Slack's limits (`_limits`), and each method against the
workspace's rules (`_rules`: scopes, expiring triggers, the rate-limit profile) first."""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict
from typing import Any

from aiohttp import web
from slack_sdk.models.messages.chunk import (
    BlocksChunk,
    Chunk,
    MarkdownTextChunk,
    PlanUpdateChunk,
    TaskUpdateChunk,
)

from ._limits import Refusal, ValidateKind, check_message, check_view, limit, validate
from ._rules import HISTORY_SCOPES, METHOD_SCOPES, TRIGGER_SECONDS
from ._workspace_model import (
    AgentSession,
    ApiCall,
    Channel,
    Ephemeral,
    Message,
    OpenedView,
    SessionStatus,
    Workspace,
)

__all__ = ["WebApi"]

_Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_SESSION_STATUSES: frozenset[str] = frozenset({"processing", "active", "suspended", "closed"})
_TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
_MARKDOWN_LIMIT = limit("markdown_text").figure
_UPDATE_TEXT_LIMIT = limit("chat.update text").figure
_TEXT_LIMIT = limit("message text").figure
_MEMBERS_LIMIT = 1000
"""The most members `conversations.members` returns per page (its `limit` defaults to 100)."""

AGENT_METHODS = frozenset(
    {
        "agents.sessions.setStatus",
        "agents.sessions.rename",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
    }
)
"""The methods only an app declared as an agent (`features.agent_view`) may call."""


class _ApiError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class _ScopeMissing(Exception):
    """`missing_scope` found in a handler (the scope depends on the conversation's kind)."""

    def __init__(self, needed: str) -> None:
        super().__init__(needed)
        self.needed = needed


class WebApi:
    """Serves `/api/{method}` from `workspace`, recording each call in `workspace.calls`.

    `socket_url` gives `apps.connections.open` the Socket Mode URL to hand the bot.
    """

    def __init__(self, workspace: Workspace, *, socket_url: Callable[[], str]) -> None:
        self.workspace = workspace
        self._socket_url = socket_url
        self._methods: dict[str, _Handler] = {
            "auth.test": self._auth_test,
            "blocks.validate": self._blocks_validate,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.delete": self._chat_delete,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.publish": self._views_publish,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "agents.sessions.setStatus": self._set_status,
            "agents.sessions.rename": self._rename,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "conversations.info": self._conversations_info,
            "conversations.members": self._conversations_members,
            "conversations.replies": self._conversations_replies,
            "usergroups.users.list": self._usergroups_users_list,
            "users.info": self._users_info,
        }

    async def handle(self, request: web.Request) -> web.Response:
        ws = self.workspace
        method = request.match_info["method"]
        try:
            args = await _read_args(request)
        except (ValueError, RecursionError):
            # JSONDecodeError and UnicodeDecodeError are ValueErrors; Slack answers this way.
            return web.json_response({"ok": False, "error": "invalid_json"})
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        token = token or args.pop("token", None)
        args.pop("token", None)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        peer_port = int(peer[1]) if isinstance(peer, tuple) and len(peer) >= 2 else None
        ws.calls.append(ApiCall(method=method, args=args, at=time.time(), peer_port=peer_port))
        await ws.publish("call", {"method": method})
        if method == "apps.connections.open":
            if token != ws.app_token:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            return web.json_response({"ok": True, "url": self._socket_url()})
        if token != ws.bot_token:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = self._methods.get(method)
        if method in AGENT_METHODS and ws.agent_refusal is not None:
            return web.json_response({"ok": False, "error": ws.agent_refusal})
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        scopes = {"x-oauth-scopes": ",".join(ws.scopes)}
        needed = self._needed_scope(method, args)
        if needed is not None and needed not in ws.scopes:
            return web.json_response(self._missing_scope(needed), headers=scopes)
        wait = ws.rate_limits.retry_after(method, _channel_of(args), ws.clock())
        if wait is not None:
            ws.calls[-1].status = 429
            await ws.publish("rate_limited", {"method": method, "status": 429})
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(wait)},
            )
        try:
            body = await handler(args)
        except _ApiError as error:
            return web.json_response({"ok": False, "error": error.code}, headers=scopes)
        except _ScopeMissing as missing:
            return web.json_response(self._missing_scope(missing.needed), headers=scopes)
        except Refusal as refusal:
            return web.json_response(refusal.body(), headers=scopes)
        return web.json_response({"ok": True, **body}, headers=scopes)

    def _missing_scope(self, needed: str) -> dict[str, Any]:
        # Slack names the scope the method wanted and the ones the token has: the recorded
        # answers of conversations.info and .members (slackapi/java-slack-sdk
        # json-logs/samples/api/conversations.info.json) carry `needed` and `provided`.
        provided = ",".join(self.workspace.scopes)
        return {"ok": False, "error": "missing_scope", "needed": needed, "provided": provided}

    def _needed_scope(self, method: str, args: Mapping[str, Any]) -> str | None:
        """The scope Slack wants for this call (conversations.replies: by the conversation)."""
        if method != "conversations.replies":
            return METHOD_SCOPES.get(method)
        found = self.workspace.channels.get(str(args.get("channel") or ""))
        kind = "im" if found and found.is_im else "mpim" if found and found.is_mpim else "channel"
        return HISTORY_SCOPES[kind]

    def _channel_arg(self, args: Mapping[str, Any], key: str = "channel") -> str:
        channel = str(args.get(key) or "")
        if channel not in self.workspace.channels:
            raise _ApiError("channel_not_found")
        return channel

    def _postable(self, args: Mapping[str, Any], key: str = "channel") -> str:
        """The channel `args` names, if the bot may post in it: Slack answers `not_in_channel`
        in a channel the bot is not a member of (`channel_not_found` when it is private)."""
        ws = self.workspace
        channel = self._channel_arg(args, key)
        if ws.bot_user_id not in ws.channel_members(channel):
            found = ws.channels[channel]
            private = found.is_private or found.is_im or found.is_mpim
            raise _ApiError("channel_not_found" if private else "not_in_channel")
        return channel

    def _message_arg(self, args: Mapping[str, Any], ts_key: str) -> Message:
        """The message `channel` and `ts_key` name."""
        channel = self._channel_arg(args)
        message = self.workspace.message(channel, str(args.get(ts_key) or ""))
        if message is None:
            raise _ApiError("message_not_found")
        return message

    async def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        return {
            "url": "http://localslack/",
            "team": "local",
            "user": "handback",
            "team_id": ws.team_id,
            "user_id": ws.bot_user_id,
            "bot_id": ws.bot_id,
            "is_enterprise_install": False,
        }

    async def _blocks_validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """`blocks.validate` (no scope needed): exactly one of `blocks`, `message`, `view`."""
        given: list[ValidateKind] = [k for k in ("blocks", "message", "view") if k in args]
        if len(given) != 1:
            raise Refusal(
                error="invalid_arguments",
                messages=["must provide exactly one of `blocks`, `view`, or `message`"],
            )
        validate(given[0], _json_arg(args, given[0]))
        return {}

    async def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        user = str(args.get("channel") or "")
        if user in ws.users and not ws.users[user].is_bot:
            # As in Slack, a user id posts in the app's direct message with that person.
            args = {**args, "channel": ws.dm_channel(user)}
        channel = self._postable(args)
        text, blocks = _text_and_blocks(args)
        thread_ts = _thread_ts(args)
        if thread_ts is not None and ws.message(channel, thread_ts) is None:
            raise _ApiError("invalid_thread_ts")
        message = Message(
            channel=channel,
            ts=ws.new_ts(),
            text=text[:_TEXT_LIMIT],  # Slack truncates longer text rather than refusing it
            bot_id=ws.bot_id,
            user=ws.bot_user_id,
            thread_ts=thread_ts,
            blocks=blocks,
        )
        ws.messages.append(message)
        await ws.publish("message", {"channel": channel, **message.to_api()})
        return {"channel": channel, "ts": message.ts, "message": message.to_api()}

    async def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._message_arg(args, "ts")
        if message.bot_id != self.workspace.bot_id:
            raise _ApiError("cant_update_message")
        text, blocks = _text_and_blocks(args)
        if len(text) > _UPDATE_TEXT_LIMIT:
            raise _ApiError("msg_too_long")
        message.text = text
        # Slack keeps the old blocks when an update leaves them out.
        if "blocks" in args:
            message.blocks = blocks
        message.edited = True
        channel = message.channel
        await self.workspace.publish("message_updated", {"channel": channel, **message.to_api()})
        return {"channel": channel, "ts": message.ts, "text": text, "message": message.to_api()}

    async def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        channel = self._postable(args)
        user = str(args.get("user") or "")
        if user not in ws.users:
            # Slack's one answer for someone it cannot show the message to in this channel.
            raise _ApiError("user_not_in_channel")
        text, blocks = _text_and_blocks(args)
        ephemeral = Ephemeral(
            channel=channel,
            user=user,
            text=text,
            thread_ts=_thread_ts(args),
            blocks=blocks,
            message_ts=ws.new_ts(),
        )
        ws.ephemerals.append(ephemeral)
        await ws.publish("ephemeral", asdict(ephemeral))
        return {"message_ts": ephemeral.message_ts}

    async def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._message_arg(args, "ts")
        self.workspace.messages.remove(message)
        where = {"channel": message.channel, "ts": message.ts}
        await self.workspace.publish("message_deleted", where)
        return where

    async def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        trigger_id = str(args.get("trigger_id") or "")
        user = ws.triggers.pop(trigger_id, None)
        if user is None:
            raise _ApiError("invalid_trigger_id")
        issued = ws.trigger_times.pop(trigger_id, None)
        if issued is not None and ws.clock() - issued > TRIGGER_SECONDS:
            raise _ApiError("expired_trigger_id")
        view = _json_arg(args, "view")
        check_view(view, kind="modal")
        opened = OpenedView(
            id=f"V{uuid.uuid4().hex[:10].upper()}",
            user=user,
            view=view,
            trigger_id=trigger_id,
            hash=uuid.uuid4().hex[:8],
        )
        self.workspace.views[opened.id] = opened
        await self.workspace.publish("view_opened", asdict(opened))
        return {"view": {"id": opened.id, "hash": opened.hash, **view}}

    async def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = str(args.get("view_id") or "")
        opened = self.workspace.views.get(view_id)
        if opened is None or opened.closed:
            raise _ApiError("not_found")
        view = _json_arg(args, "view")
        check_view(view, kind="modal")
        opened.view = view
        opened.hash = uuid.uuid4().hex[:8]
        await self.workspace.publish("view_updated", asdict(opened))
        return {"view": {"id": opened.id, "hash": opened.hash, **view}}

    async def _views_publish(self, args: dict[str, Any]) -> dict[str, Any]:
        """A person's App Home view, checked as Slack checks it: a known user, a view of type
        `home` within Slack's limits (`check_view`)."""
        user = str(args.get("user_id") or "")
        if user not in self.workspace.users:
            raise _ApiError("user_not_found")
        view = _json_arg(args, "view")
        check_view(view, kind="home")
        self.workspace.home_views[user] = view
        view_id = f"VHOME{user}"
        await self.workspace.publish("home_published", {"user": user, "view": view})
        return {"view": {"id": view_id, "type": "home", **view}}

    async def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        message = self._message_arg(args, "timestamp")
        name = str(args.get("name") or "")
        users = message.reactions.setdefault(name, [])
        if ws.bot_user_id in users:
            raise _ApiError("already_reacted")
        users.append(ws.bot_user_id)
        await ws.publish(
            "reaction_added", {"channel": message.channel, "ts": message.ts, "name": name}
        )
        return {}

    async def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        message = self._message_arg(args, "timestamp")
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

    async def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        status = str(args.get("status") or "")
        if status not in _SESSION_STATUSES:
            raise _ApiError("invalid_status")
        session = self._session(args, status)  # type: ignore[arg-type]
        if args.get("title"):
            session.title = str(args["title"])
        if args.get("initiator_user_id"):
            initiator = str(args["initiator_user_id"])
            if initiator not in self.workspace.users:
                raise _ApiError("user_not_found")
            session.initiator_user_id = initiator
        await self._session_changed(session)
        return {"status": session.status, "title": session.title}

    async def _rename(self, args: dict[str, Any]) -> dict[str, Any]:
        key = (self._channel_arg(args, "channel_id"), str(args.get("thread_ts") or ""))
        session = self.workspace.sessions.get(key)
        if session is None:
            raise _ApiError("session_not_found")
        title = str(args.get("title") or "")
        if not title:
            raise _ApiError("invalid_arguments")
        session.title = title
        await self._session_changed(session)
        return {"title": title}

    def _session(self, args: Mapping[str, Any], status: SessionStatus) -> AgentSession:
        """The session of the thread `args` name, created if new, moved to `status`."""
        ws = self.workspace
        channel = self._channel_arg(args, "channel_id")
        thread_ts = str(args.get("thread_ts") or "")
        if ws.message(channel, thread_ts) is None:
            # docs.slack.dev/reference/methods/assistant.threads.setStatus (the method
            # agents.sessions.setStatus follows) answers a thread it cannot find this way.
            raise _ApiError("invalid_thread_ts")
        session = ws.sessions.get((channel, thread_ts))
        if session is None:
            session = AgentSession(channel=channel, thread_ts=thread_ts, status=status)
            ws.sessions[(channel, thread_ts)] = session
        session.status = status
        session.history.append(status)
        return session

    async def _session_changed(self, session: AgentSession) -> None:
        await self.workspace.publish(
            "status",
            {
                "channel": session.channel,
                "thread_ts": session.thread_ts,
                "status": session.status,
                "title": session.title,
            },
        )

    async def _start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        channel = self._postable(args)
        thread_ts = _thread_ts(args)
        if thread_ts is None or ws.message(channel, thread_ts) is None:
            # thread_ts is required (docs.slack.dev/reference/methods/chat.startStream: "Streamed
            # messages should always be replies"); the error name follows the session methods'
            # (unconfirmed for this method: its page's error table was not at hand).
            raise _ApiError("invalid_thread_ts")
        if not ws.channels[channel].is_im:
            # Outside a DM Slack must know who the stream is for.
            if not args.get("recipient_user_id"):
                raise _ApiError("missing_recipient_user_id")
            if not args.get("recipient_team_id"):
                raise _ApiError("missing_recipient_team_id")
            if str(args["recipient_user_id"]) not in ws.users:
                raise _ApiError("user_not_found")
            if str(args["recipient_team_id"]) != ws.team_id:
                raise _ApiError("team_not_found")
        if args.get("task_display_mode") not in {None, "timeline", "plan"}:
            raise _ApiError("invalid_arguments")
        chunks = _streamed_chunks(args)
        message = Message(
            channel=channel,
            ts=ws.new_ts(),
            bot_id=ws.bot_id,
            user=ws.bot_user_id,
            thread_ts=thread_ts,
            streaming=True,
        )
        _append(message, chunks)
        ws.messages.append(message)
        await ws.publish("message", {"channel": channel, **message.to_api()})
        return {"channel": channel, "ts": message.ts}

    async def _append_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(args)
        chunks = _streamed_chunks(args)
        if not chunks:
            raise _ApiError("no_text")
        _append(message, chunks)
        await self._message_changed(message)
        return {"channel": message.channel, "ts": message.ts}

    async def _stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self._streaming(args)
        _append(message, _streamed_chunks(args))
        if "blocks" in args:
            _, message.blocks = _text_and_blocks({"blocks": args["blocks"], "text": "-"})
            check_message(message.blocks)
        message.streaming = False
        status = args.get("session_status")
        if status is not None:
            if status not in _SESSION_STATUSES:
                raise _ApiError("invalid_status")
            where = {"channel_id": message.channel, "thread_ts": message.thread_ts}
            await self._session_changed(self._session(where, status))
        await self._message_changed(message)
        return {"channel": message.channel, "ts": message.ts, "message": message.to_api()}

    def _streaming(self, args: Mapping[str, Any]) -> Message:
        message = self._message_arg(args, "ts")
        if message.bot_id != self.workspace.bot_id:
            raise _ApiError("message_not_owned_by_app")
        if message.stopped_by_user:
            raise _ApiError("stopped_by_user")
        if not message.streaming:
            raise _ApiError("message_not_in_streaming_state")
        return message

    async def _message_changed(self, message: Message) -> None:
        await self.workspace.publish(
            "message_updated", {"channel": message.channel, **message.to_api()}
        )

    async def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        ws = self.workspace
        channel = self._channel_arg(args)
        ts = str(args.get("ts") or "")
        if ws.message(channel, ts) is None:
            raise _ApiError("thread_not_found")
        return {"messages": [m.to_api() for m in ws.thread(channel, ts)], "has_more": False}

    def _visible_channel(self, args: Mapping[str, Any]) -> Channel:
        """The channel `args` names, as the bot may read it: a private channel (or a DM, a
        group DM) the bot is not in is `channel_not_found`, as Slack answers; reading one
        needs the scope of its kind (`missing_scope` otherwise)."""
        ws = self.workspace
        channel = ws.channels[self._channel_arg(args)]
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

    async def _conversations_info(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._visible_channel(args)
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

    async def _conversations_members(self, args: dict[str, Any]) -> dict[str, Any]:
        """One page of the channel's members: `limit` (100 by default, at most 1000) from the
        `cursor` of the page before; `next_cursor` is empty on the last page."""
        channel = self._visible_channel(args)
        members = self.workspace.channel_members(channel.id)
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

    async def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = str(args.get("usergroup") or "")
        if group not in self.workspace.usergroups:
            raise _ApiError("no_such_subteam")
        return {"users": list(self.workspace.usergroups[group])}

    async def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.workspace.users.get(str(args.get("user") or ""))
        if user is None:
            raise _ApiError("user_not_found")
        return {
            "user": {
                "id": user.id,
                "team_id": self.workspace.team_id,
                "name": user.name,
                "real_name": user.name.title(),
                "is_bot": user.is_bot,
                "profile": {"display_name": user.name, "real_name": user.name.title()},
            }
        }


async def _read_args(request: web.Request) -> dict[str, Any]:
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


def _json_arg(args: Mapping[str, Any], key: str) -> Any:
    value = args.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise _ApiError("invalid_arguments") from None
    return value


def _thread_ts(args: Mapping[str, Any]) -> str | None:
    return str(args["thread_ts"]) if args.get("thread_ts") else None


def _streamed_chunks(args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`markdown_text` and `chunks` of a stream call as chunks, each checked by slack_sdk's model
    of its type; anything else is `invalid_chunks`, as Slack answers."""
    chunks: list[dict[str, Any]] = []
    markdown = args.get("markdown_text")
    if markdown is not None:
        chunks.append({"type": "markdown_text", "text": markdown})
    given = _json_arg(args, "chunks")
    if given is not None:
        if not isinstance(given, list):
            raise _ApiError("invalid_chunks")
        chunks += given
    return [_checked_chunk(chunk) for chunk in chunks]


_CHUNK_MODELS: dict[str, type[Chunk]] = {
    model.type: model
    for model in (MarkdownTextChunk, TaskUpdateChunk, PlanUpdateChunk, BlocksChunk)
}


def _checked_chunk(chunk: Any) -> dict[str, Any]:
    if not isinstance(chunk, dict) or chunk.get("type") not in _CHUNK_MODELS:
        raise _ApiError("invalid_chunks")
    fields = {k: v for k, v in chunk.items() if k != "type"}
    try:
        model = _CHUNK_MODELS[chunk["type"]](**fields)
    except TypeError:
        raise _ApiError("invalid_chunks") from None
    attributes = model.attributes if isinstance(model.attributes, set) else set()
    if set(fields) - attributes:
        raise _ApiError("invalid_chunks")  # a field the model does not know
    if isinstance(model, MarkdownTextChunk) and (
        not isinstance(model.text, str) or len(model.text) > _MARKDOWN_LIMIT
    ):
        raise _ApiError("invalid_chunks")
    if isinstance(model, TaskUpdateChunk) and (
        model.status not in _TASK_STATUSES or not model.id or not model.title
    ):
        raise _ApiError("invalid_chunks")
    return model.to_dict()


def _append(message: Message, chunks: list[dict[str, Any]]) -> None:
    message.chunks += chunks
    message.text += "".join(str(c["text"]) for c in chunks if c["type"] == "markdown_text")


def _text_and_blocks(args: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    blocks = _json_arg(args, "blocks") or []
    check_message(blocks)
    text = str(args.get("text") or "")
    if not text and not blocks:
        raise _ApiError("no_text")
    return text, blocks


def _channel_of(args: Mapping[str, Any]) -> str | None:
    return str(args.get("channel") or args.get("channel_id") or "") or None
