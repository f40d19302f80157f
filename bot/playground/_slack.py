"""A local stand-in for Slack: an in-memory workspace, its Web API, and a driver for the bot.

The bot's real `slack_sdk` client calls this server through `SLACK_API_URL`; people are played
by helpers that post signed events and interactivity payloads to the bot's real `/slack/events`
endpoint, exactly as Slack would. Tests and the playground page both build on it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlencode

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

__all__ = [
    "ApiCall",
    "BotResponse",
    "Change",
    "ChangeKind",
    "LocalSlack",
    "Message",
    "OpenedView",
    "Target",
]

T = TypeVar("T")

ChangeKind = Literal[
    "message",
    "message_updated",
    "message_deleted",
    "ephemeral",
    "view_opened",
    "view_updated",
    "reaction_added",
    "reaction_removed",
    "status",
    "call",
    "rate_limited",
]


@dataclass(kw_only=True)
class Message:
    """A message in a channel, as Slack stores it."""

    channel: str
    ts: str
    text: str = ""
    user: str | None = None
    """The author for people's messages."""
    bot_id: str | None = None
    """Set on messages the bot posted."""
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[str, list[str]] = field(default_factory=dict)
    """Reaction name -> the users who added it."""
    edited: bool = False

    def to_api(self) -> dict[str, Any]:
        """The message as the Web API and the Events API show it."""
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.user:
            out["user"] = self.user
        if self.bot_id:
            out["bot_id"] = self.bot_id
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if self.blocks:
            out["blocks"] = self.blocks
        if self.reactions:
            out["reactions"] = [
                {"name": name, "users": users, "count": len(users)}
                for name, users in self.reactions.items()
            ]
        return out


@dataclass(kw_only=True)
class Ephemeral:
    """A message only one person sees."""

    channel: str
    user: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    message_ts: str = ""


@dataclass(kw_only=True)
class OpenedView:
    """A modal the bot opened for a person."""

    id: str
    user: str
    view: dict[str, Any]
    trigger_id: str
    hash: str = ""
    closed: bool = False


@dataclass(kw_only=True)
class ApiCall:
    """One Web API call the bot made, as received."""

    method: str
    args: dict[str, Any]
    at: float
    status: int = 200


@dataclass(kw_only=True)
class Change:
    """One change to the workspace, for `wait_for` and the playground's live feed."""

    seq: int
    kind: ChangeKind
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "data": self.data}


@dataclass(kw_only=True)
class BotResponse:
    """What the bot answered to a request LocalSlack sent it."""

    status: int
    body: str
    url: str = ""
    """The endpoint that answered (empty over Socket Mode)."""
    each: list[BotResponse] = field(default_factory=list)
    """For a delivery to every endpoint: each one's response, in endpoint order (this response is
    the first of them)."""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(kw_only=True)
class _User:
    id: str
    name: str
    is_bot: bool = False


@dataclass(kw_only=True)
class _Channel:
    id: str
    name: str
    is_im: bool = False
    im_user: str | None = None


Target = int | Literal["next", "all"]
"""Which bot endpoint gets a delivery: one by index, the next one in turn, or every one at once
(as when Slack retries an event and each attempt lands on another process behind a balancer)."""

_Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class LocalSlack:
    """An in-memory Slack workspace serving the Web API and playing its people.

    Use it as an async context manager; it listens on `host:port` (port 0 picks a free one) and
    exposes `api_url` (the `SLACK_API_URL` for the bot). Set `bot_url` to the bot's
    `/slack/events` URL before driving it, or `bot_urls` to several bot processes' URLs: each
    delivery then goes where its `to` says, by default (`route`) to the next one in turn.
    """

    def __init__(
        self,
        *,
        signing_secret: str = "local-signing-secret",
        bot_token: str = "xoxb-local-token",
        bot_url: str | None = None,
        bot_urls: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        team_id: str = "T0LOCAL",
        api_app_id: str = "A0HANDBACK",
        bot_user_id: str = "U0HANDBACK",
        bot_id: str = "B0HANDBACK",
        app_token: str = "xapp-local-token",
        with_demo_people: bool = True,
    ) -> None:
        self.signing_secret = signing_secret
        self.bot_token = bot_token
        self.bot_urls: list[str] = [*([bot_url] if bot_url else []), *bot_urls]
        """The bot endpoints (`/slack/events` URLs) deliveries go to over HTTP."""
        self.route: Target = "next"
        """Where a delivery without its own `to` goes."""
        self._turn = itertools.count()
        self.host = host
        self.port = port
        self.team_id = team_id
        self.api_app_id = api_app_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_token = app_token
        self.delivery: Literal["http", "socket"] = "http"
        """How events and interactivity reach the bot: POSTs to `bot_url`, or envelopes over
        the Socket Mode WebSocket the bot opened (`apps.connections.open`)."""

        self.users: dict[str, _User] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.channels: dict[str, _Channel] = {}
        self.messages: list[Message] = []
        self.ephemerals: list[Ephemeral] = []
        self.views: dict[str, OpenedView] = {}
        self.statuses: list[dict[str, str]] = []
        self.calls: list[ApiCall] = []
        self.changes: list[Change] = []

        self._verifier = SignatureVerifier(signing_secret)
        self._clock = itertools.count(1)
        self._base_ts = int(time.time())
        self._seq = itertools.count(1)
        self._event_seq = itertools.count(1)
        self._fail_next: dict[str, list[tuple[int, int]]] = {}
        self._triggers: dict[str, str] = {}
        """trigger_id -> the user whose action issued it."""
        self._selections: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
        """(channel, message ts, user) -> block_id -> action_id -> element state."""
        self._condition = asyncio.Condition()
        self._subscribers: set[asyncio.Queue[Change]] = set()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future[Any]] = {}

        self.add_user(bot_user_id, "handback", is_bot=True)
        if with_demo_people:
            self.add_user("U0ALICE", "alice")
            self.add_user("U0BOB", "bob")
            self.add_user("U0CAROL", "carol")
            self.add_user("U0DAVE", "dave")
            self.add_usergroup("S0OPS", ["U0BOB", "U0CAROL"])
            self.add_channel("C0GENERAL", "general")
            self.add_channel("C0DEPLOYS", "deploys")

    @property
    def bot_url(self) -> str | None:
        """The first bot endpoint; setting it makes it the only one."""
        return self.bot_urls[0] if self.bot_urls else None

    @bot_url.setter
    def bot_url(self, url: str | None) -> None:
        self.bot_urls = [url] if url else []

    # ----------------------------------------------------------------- workspace

    def add_user(self, user_id: str, name: str, *, is_bot: bool = False) -> None:
        self.users[user_id] = _User(id=user_id, name=name, is_bot=is_bot)

    def add_usergroup(self, group_id: str, members: Iterable[str]) -> None:
        self.usergroups[group_id] = list(members)

    def add_channel(self, channel_id: str, name: str) -> None:
        self.channels[channel_id] = _Channel(id=channel_id, name=name)

    def dm_channel(self, user: str) -> str:
        """The direct-message channel between `user` and the bot (created on first use)."""
        for channel in self.channels.values():
            if channel.is_im and channel.im_user == user:
                return channel.id
        channel_id = f"D0{user.removeprefix('U')}"
        self.channels[channel_id] = _Channel(id=channel_id, name=user, is_im=True, im_user=user)
        return channel_id

    def message(self, channel: str, ts: str) -> Message | None:
        for message in self.messages:
            if message.channel == channel and message.ts == ts:
                return message
        return None

    def find_message(self, ts: str) -> Message | None:
        for message in self.messages:
            if message.ts == ts:
                return message
        return None

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's parent and replies, oldest first."""
        return [
            m
            for m in self.messages
            if m.channel == channel and (m.ts == thread_ts or m.thread_ts == thread_ts)
        ]

    def bot_messages(
        self, channel: str | None = None, thread_ts: str | None = None
    ) -> list[Message]:
        return [
            m
            for m in self.messages
            if m.bot_id == self.bot_id
            and (channel is None or m.channel == channel)
            and (thread_ts is None or m.thread_ts == thread_ts)
        ]

    def ephemerals_for(self, user: str) -> list[Ephemeral]:
        return [e for e in self.ephemerals if e.user == user]

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method and c.status == 200]

    def snapshot(self) -> dict[str, Any]:
        """The whole workspace as JSON, for the playground page's first paint."""
        return {
            "bot_user_id": self.bot_user_id,
            "users": [asdict(u) for u in self.users.values()],
            "usergroups": self.usergroups,
            "channels": [asdict(c) for c in self.channels.values()],
            "messages": [{"channel": m.channel, **m.to_api()} for m in self.messages],
            "ephemerals": [asdict(e) for e in self.ephemerals],
            "views": [asdict(v) for v in self.views.values() if not v.closed],
            "seq": self.changes[-1].seq if self.changes else 0,
        }

    def fail_next(self, method: str, *, status: int = 429, retry_after: int = 0) -> None:
        """Answer the next call to `method` with `status` and a `Retry-After` header."""
        self._fail_next.setdefault(method, []).append((status, retry_after))

    # ------------------------------------------------------------------- changes

    async def wait_for(self, predicate: Callable[[], T], *, timeout: float = 10.0) -> T:  # noqa: ASYNC109
        """Wait until `predicate()` is truthy (re-checked on every change) and return its value."""
        async with asyncio.timeout(timeout):
            async with self._condition:
                while True:
                    value = predicate()
                    if value:
                        return value
                    await self._condition.wait()

    def subscribe(self) -> asyncio.Queue[Change]:
        """A queue that receives every later change; `unsubscribe` it when done."""
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Change]) -> None:
        self._subscribers.discard(queue)

    async def _changed(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        change = Change(seq=next(self._seq), kind=kind, data=data)
        self.changes.append(change)
        for queue in self._subscribers:
            queue.put_nowait(change)
        async with self._condition:
            self._condition.notify_all()

    def _new_ts(self) -> str:
        return f"{self._base_ts}.{next(self._clock):06d}"

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalSlack was closed; make a new one")
        if self._runner is not None:
            return
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_get("/socket-mode", self._handle_socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])
        self._session = aiohttp.ClientSession()

    async def aclose(self) -> None:
        self._closed = True
        for socket in list(self._sockets):
            await socket.close()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_url(self) -> str:
        """The Web API base URL for `slack_sdk` (`SLACK_API_URL`), ending with a slash."""
        return f"http://{self.host}:{self.port}/api/"

    # ------------------------------------------------------------------ Web API

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else None
        token = token or args.pop("token", None)
        args.pop("token", None)
        failures = self._fail_next.get(method)
        if failures:
            status, retry_after = failures.pop(0)
            self.calls.append(ApiCall(method=method, args=args, at=time.time(), status=status))
            await self._changed("rate_limited", {"method": method, "status": status})
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=status,
                headers={"Retry-After": str(retry_after)},
            )
        self.calls.append(ApiCall(method=method, args=args, at=time.time()))
        await self._changed("call", {"method": method})
        if method == "apps.connections.open":
            if token != self.app_token:
                return web.json_response({"ok": False, "error": "invalid_auth"})
            url = f"ws://{self.host}:{self.port}/socket-mode?ticket={uuid.uuid4().hex}"
            return web.json_response({"ok": True, "url": url})
        if token != self.bot_token:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = self._methods().get(method)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        try:
            body = await handler(args)
        except _ApiError as error:
            return web.json_response({"ok": False, "error": error.code})
        return web.json_response({"ok": True, **body})

    # -------------------------------------------------------------- Socket Mode

    @property
    def socket_connected(self) -> bool:
        return any(not socket.closed for socket in self._sockets)

    async def _handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "localslack", "approximate_connection_time": 3600},
                "connection_info": {"app_id": self.api_app_id},
            }
        )
        await self._changed("call", {"method": "socket_mode.connected"})
        try:
            async for frame in socket:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                ack = json.loads(frame.data)
                waiter = self._acks.pop(str(ack.get("envelope_id")), None)
                if waiter is not None and not waiter.done():
                    waiter.set_result(ack.get("payload"))
        finally:
            self._sockets.remove(socket)
            await self._changed("call", {"method": "socket_mode.disconnected"})
        return socket

    async def _send_envelope(
        self, kind: Literal["events_api", "interactive"], payload: dict[str, Any], retry: int
    ) -> BotResponse:
        """Deliver over Socket Mode and wait for the app's ack, as Slack does (3 s)."""
        sockets = [socket for socket in self._sockets if not socket.closed]
        if not sockets:
            raise RuntimeError("no Socket Mode connection: the bot has not connected yet")
        envelope_id = str(uuid.uuid4())
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = waiter
        await sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind == "interactive",
                "retry_attempt": retry,
                "retry_reason": "timeout" if retry else "",
            }
        )
        try:
            async with asyncio.timeout(3):
                answer = await waiter
        except TimeoutError:
            self._acks.pop(envelope_id, None)
            return BotResponse(status=504, body="")
        return BotResponse(status=200, body=json.dumps(answer) if answer else "")

    def _methods(self) -> dict[str, _Handler]:
        return {
            "auth.test": self._auth_test,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.delete": self._chat_delete,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "reactions.add": self._reactions_add,
            "reactions.remove": self._reactions_remove,
            "assistant.threads.setStatus": self._set_status,
            "conversations.replies": self._conversations_replies,
            "usergroups.users.list": self._usergroups_users_list,
            "users.info": self._users_info,
        }

    async def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "http://localslack/",
            "team": "local",
            "user": "handback",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _channel_arg(self, args: Mapping[str, Any], key: str = "channel") -> str:
        channel = str(args.get(key) or "")
        if channel not in self.channels:
            raise _ApiError("channel_not_found")
        return channel

    async def _chat_post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        text, blocks = _text_and_blocks(args)
        thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        if thread_ts is not None and self.message(channel, thread_ts) is None:
            raise _ApiError("thread_not_found")
        message = Message(
            channel=channel,
            ts=self._new_ts(),
            text=text,
            bot_id=self.bot_id,
            user=self.bot_user_id,
            thread_ts=thread_ts,
            blocks=blocks,
        )
        self.messages.append(message)
        await self._changed("message", {"channel": channel, **message.to_api()})
        return {"channel": channel, "ts": message.ts, "message": message.to_api()}

    async def _chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        message = self.message(channel, str(args.get("ts") or ""))
        if message is None:
            raise _ApiError("message_not_found")
        if message.bot_id != self.bot_id:
            raise _ApiError("cant_update_message")
        text, blocks = _text_and_blocks(args)
        message.text = text
        # Slack keeps the old blocks when an update leaves them out.
        if "blocks" in args:
            message.blocks = blocks
        message.edited = True
        await self._changed("message_updated", {"channel": channel, **message.to_api()})
        return {"channel": channel, "ts": message.ts, "text": text, "message": message.to_api()}

    async def _chat_post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        user = str(args.get("user") or "")
        if user not in self.users:
            raise _ApiError("user_not_found")
        text, blocks = _text_and_blocks(args)
        ephemeral = Ephemeral(
            channel=channel,
            user=user,
            text=text,
            thread_ts=str(args["thread_ts"]) if args.get("thread_ts") else None,
            blocks=blocks,
            message_ts=self._new_ts(),
        )
        self.ephemerals.append(ephemeral)
        await self._changed("ephemeral", asdict(ephemeral))
        return {"message_ts": ephemeral.message_ts}

    async def _chat_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        message = self.message(channel, str(args.get("ts") or ""))
        if message is None:
            raise _ApiError("message_not_found")
        self.messages.remove(message)
        await self._changed("message_deleted", {"channel": channel, "ts": message.ts})
        return {"channel": channel, "ts": message.ts}

    async def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        trigger_id = str(args.get("trigger_id") or "")
        user = self._triggers.pop(trigger_id, None)
        if user is None:
            raise _ApiError("invalid_trigger_id")
        view = _json_arg(args, "view")
        if not isinstance(view, dict) or view.get("type") != "modal":
            raise _ApiError("invalid_arguments")
        opened = OpenedView(
            id=f"V{uuid.uuid4().hex[:10].upper()}",
            user=user,
            view=view,
            trigger_id=trigger_id,
            hash=uuid.uuid4().hex[:8],
        )
        self.views[opened.id] = opened
        await self._changed("view_opened", asdict(opened))
        return {"view": {"id": opened.id, "hash": opened.hash, **view}}

    async def _views_update(self, args: dict[str, Any]) -> dict[str, Any]:
        view_id = str(args.get("view_id") or "")
        opened = self.views.get(view_id)
        if opened is None or opened.closed:
            raise _ApiError("not_found")
        view = _json_arg(args, "view")
        if not isinstance(view, dict):
            raise _ApiError("invalid_arguments")
        opened.view = view
        opened.hash = uuid.uuid4().hex[:8]
        await self._changed("view_updated", asdict(opened))
        return {"view": {"id": opened.id, "hash": opened.hash, **view}}

    async def _reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        message = self.message(channel, str(args.get("timestamp") or ""))
        if message is None:
            raise _ApiError("message_not_found")
        name = str(args.get("name") or "")
        users = message.reactions.setdefault(name, [])
        if self.bot_user_id in users:
            raise _ApiError("already_reacted")
        users.append(self.bot_user_id)
        await self._changed("reaction_added", {"channel": channel, "ts": message.ts, "name": name})
        return {}

    async def _reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        message = self.message(channel, str(args.get("timestamp") or ""))
        if message is None:
            raise _ApiError("message_not_found")
        name = str(args.get("name") or "")
        users = message.reactions.get(name, [])
        if self.bot_user_id not in users:
            raise _ApiError("no_reaction")
        users.remove(self.bot_user_id)
        if not users:
            del message.reactions[name]
        await self._changed(
            "reaction_removed", {"channel": channel, "ts": message.ts, "name": name}
        )
        return {}

    async def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args, "channel_id")
        status = {
            "channel": channel,
            "thread_ts": str(args.get("thread_ts") or ""),
            "status": str(args.get("status") or ""),
        }
        self.statuses.append(status)
        await self._changed("status", status)
        return {}

    async def _conversations_replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_arg(args)
        ts = str(args.get("ts") or "")
        if self.message(channel, ts) is None:
            raise _ApiError("thread_not_found")
        return {"messages": [m.to_api() for m in self.thread(channel, ts)], "has_more": False}

    async def _usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        group = str(args.get("usergroup") or "")
        if group not in self.usergroups:
            raise _ApiError("no_such_subteam")
        return {"users": list(self.usergroups[group])}

    async def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(args.get("user") or ""))
        if user is None:
            raise _ApiError("user_not_found")
        return {
            "user": {
                "id": user.id,
                "team_id": self.team_id,
                "name": user.name,
                "real_name": user.name.title(),
                "is_bot": user.is_bot,
                "profile": {"display_name": user.name, "real_name": user.name.title()},
            }
        }

    # -------------------------------------------------------------- the people

    async def post_user_message(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        mention: bool = True,
        deliver: bool = True,
        to: Target | None = None,
    ) -> Message:
        """Post a person's message and deliver the events Slack would send the bot.

        In a channel a mention yields both `app_mention` and `message` events (an app subscribed
        to both gets both); without a mention only `message`. In a DM only `message`. With
        `deliver=False` the message is only stored; `events_for()` gives its events. `to` picks
        the bot endpoint of each event (see `send_raw`).
        """
        if channel not in self.channels:
            raise KeyError(f"no channel {channel!r}")
        if mention and not self.channels[channel].is_im:
            text = f"<@{self.bot_user_id}> {text}"
        message = Message(
            channel=channel, ts=self._new_ts(), text=text, user=user, thread_ts=thread_ts
        )
        self.messages.append(message)
        await self._changed("message", {"channel": channel, **message.to_api()})
        if deliver:
            for event in self.events_for(message):
                await self.send_event(event, to=to)
        return message

    def events_for(self, message: Message) -> list[dict[str, Any]]:
        """The events Slack sends an app subscribed to `app_mention`, `message.channels` and
        `message.im` for a person's message."""
        chan = self.channels[message.channel]
        base: dict[str, Any] = {
            "user": message.user,
            "text": message.text,
            "ts": message.ts,
            "channel": message.channel,
            "event_ts": message.ts,
        }
        if message.thread_ts:
            base["thread_ts"] = message.thread_ts
        events = []
        if not chan.is_im and f"<@{self.bot_user_id}>" in message.text:
            events.append({"type": "app_mention", **base})
        channel_type = "im" if chan.is_im else "channel"
        events.append({"type": "message", "channel_type": channel_type, **base})
        return events

    def event_envelope(
        self, event: dict[str, Any], *, event_id: str | None = None
    ) -> dict[str, Any]:
        """An `event_callback` envelope around `event`, as the Events API delivers it."""
        return {
            "token": "legacy-verification-token",
            "team_id": self.team_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(self._event_seq):08d}{uuid.uuid4().hex[:6]}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }

    async def send_event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """Deliver one event to the bot (a retry repeats `event_id` with `retry_num`); with
        `to="all"` every endpoint gets the very same envelope."""
        envelope = self.event_envelope(event, event_id=event_id)
        if self.delivery == "socket":
            return await self._send_envelope("events_api", envelope, retry_num or 0)
        headers = {"Content-Type": "application/json"}
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.send_raw(json.dumps(envelope), headers=headers, to=to)

    def block_actions_payload(
        self,
        user: str,
        message_ts: str,
        action_id: str,
        *,
        value: str | None = None,
        selected: str | list[str] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """A real `block_actions` payload for a person acting on a stored message.

        The element is found in the message's blocks by `action_id` (and `value` for buttons that
        share an action id). `selected` picks options of a select by value or label.
        """
        message = self.message(channel, message_ts) if channel else self.find_message(message_ts)
        if message is None:
            raise KeyError(f"no message with ts {message_ts!r}")
        block, element = _find_element(message.blocks, action_id, value)
        action: dict[str, Any] = {
            "action_id": action_id,
            "block_id": block.get("block_id", ""),
            "type": element["type"],
            "action_ts": f"{time.time():.6f}",
        }
        state_key = (message.channel, message.ts, user)
        kind = element["type"]
        if kind == "button":
            action["value"] = element.get("value", "") if value is None else value
            action["text"] = element.get("text", {})
        elif kind in {"static_select", "radio_buttons", "external_select"}:
            if selected is None or isinstance(selected, list):
                raise ValueError(f"{kind} needs one `selected` option")
            option = _find_option(element, selected)
            action["selected_option"] = option
            self._remember(state_key, block, action_id, {"type": kind, "selected_option": option})
        elif kind in {"multi_static_select", "checkboxes"}:
            picks = [selected] if isinstance(selected, str) else list(selected or [])
            options = [_find_option(element, pick) for pick in picks]
            action["selected_options"] = options
            self._remember(state_key, block, action_id, {"type": kind, "selected_options": options})
        else:
            raise ValueError(f"LocalSlack cannot act on a {kind!r} element")
        trigger_id = f"{next(self._event_seq)}.{uuid.uuid4().hex[:12]}"
        self._triggers[trigger_id] = user
        name = self.users[user].name if user in self.users else user
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
        }
        if message.thread_ts:
            container["thread_ts"] = message.thread_ts
        return {
            "type": "block_actions",
            "user": {"id": user, "username": name, "name": name, "team_id": self.team_id},
            "api_app_id": self.api_app_id,
            "token": "legacy-verification-token",
            "container": container,
            "trigger_id": trigger_id,
            "team": {"id": self.team_id, "domain": "local"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel, "name": self.channels[message.channel].name},
            "message": {**message.to_api()},
            "state": {"values": self._selections.get(state_key, {})},
            "response_url": f"{self.api_url}response/{uuid.uuid4().hex}",
            "actions": [action],
        }

    def _remember(
        self,
        key: tuple[str, str, str],
        block: dict[str, Any],
        action_id: str,
        state: dict[str, Any],
    ) -> None:
        values = self._selections.setdefault(key, {})
        values.setdefault(str(block.get("block_id", "")), {})[action_id] = state

    async def click(
        self,
        user: str,
        message_ts: str,
        action_id: str,
        *,
        value: str | None = None,
        selected: str | list[str] | None = None,
        channel: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """A person clicks a button or picks from a select on a stored message."""
        payload = self.block_actions_payload(
            user, message_ts, action_id, value=value, selected=selected, channel=channel
        )
        return await self.send_interactivity(payload, to=to)

    def view_submission_payload(
        self, user: str, view_id: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A `view_submission` payload; `values` maps each input block_id to what was typed.

        A string fills a text, number or date input; an option value or label (or a list of them)
        fills a select. Inputs left out are submitted empty.
        """
        opened = self.views.get(view_id)
        if opened is None or opened.closed:
            raise KeyError(f"no open view {view_id!r}")
        if opened.user != user:
            raise ValueError(f"view {view_id!r} was opened for {opened.user!r}, not {user!r}")
        state: dict[str, dict[str, Any]] = {}
        for block in opened.view.get("blocks", []):
            if block.get("type") != "input":
                continue
            block_id = str(block.get("block_id", ""))
            element = block.get("element", {})
            state[block_id] = {
                str(element.get("action_id", "")): _input_state(element, values.get(block_id))
            }
        unknown = set(values) - set(state)
        if unknown:
            raise KeyError(f"view {view_id!r} has no input blocks {sorted(unknown)!r}")
        name = self.users[user].name if user in self.users else user
        view = {
            "id": opened.id,
            "team_id": self.team_id,
            "type": "modal",
            "hash": opened.hash,
            "app_id": self.api_app_id,
            "bot_id": self.bot_id,
            **opened.view,
            "state": {"values": state},
        }
        return {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": "local"},
            "user": {"id": user, "username": name, "name": name, "team_id": self.team_id},
            "api_app_id": self.api_app_id,
            "token": "legacy-verification-token",
            "trigger_id": f"{next(self._event_seq)}.{uuid.uuid4().hex[:12]}",
            "view": view,
            "response_urls": [],
            "is_enterprise_install": False,
            "enterprise": None,
        }

    async def submit_view(
        self, user: str, view_id: str, values: Mapping[str, Any], *, to: Target | None = None
    ) -> BotResponse:
        """Submit a modal; the bot's JSON answer (e.g. `response_action: errors`) comes back.

        The view closes unless the bot answered with errors or another response action.
        """
        payload = self.view_submission_payload(user, view_id, values)
        response = await self.send_interactivity(payload, to=to)
        body = response.json() if response.status == 200 and response.body.strip() else None
        if response.status == 200 and not (isinstance(body, dict) and body.get("response_action")):
            self.views[view_id].closed = True
            await self._changed("view_updated", asdict(self.views[view_id]))
        return response

    async def send_interactivity(
        self, payload: dict[str, Any], *, to: Target | None = None
    ) -> BotResponse:
        """POST an interactivity payload form-encoded as `payload=`, signed (or send it over
        Socket Mode)."""
        if self.delivery == "socket":
            return await self._send_envelope("interactive", payload, 0)
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send_raw(
            body, headers={"Content-Type": "application/x-www-form-urlencoded"}, to=to
        )

    async def send_raw(
        self,
        body: str,
        *,
        headers: Mapping[str, str] | None = None,
        sign: bool = True,
        timestamp: int | None = None,
        signature: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """POST `body` to the bot, signed as Slack signs.

        `sign=False`, an old `timestamp` or a forged `signature` make a tampered request. `to`
        picks the endpoint among `bot_urls` (default `route`): an index, `"next"` in turn, or
        `"all"` at once, which returns the first endpoint's response with every one in `each`.
        """
        targets = self._targets(to)
        if self._session is None:
            raise RuntimeError("LocalSlack is not started")
        all_headers = dict(headers or {})
        all_headers.setdefault("Content-Type", "application/json")
        if sign:
            ts = str(timestamp if timestamp is not None else int(time.time()))
            all_headers["X-Slack-Request-Timestamp"] = ts
            all_headers["X-Slack-Signature"] = signature or str(
                self._verifier.generate_signature(timestamp=ts, body=body)
            )
        if len(targets) == 1:
            return await self._post(self._session, targets[0], body, all_headers)
        each = await asyncio.gather(
            *(self._post(self._session, url, body, all_headers) for url in targets)
        )
        return BotResponse(status=each[0].status, body=each[0].body, url=each[0].url, each=each)

    def _targets(self, to: Target | None) -> list[str]:
        if not self.bot_urls:
            raise RuntimeError("set `bot_url` to the bot's /slack/events URL first")
        target = self.route if to is None else to
        if target == "all":
            return list(self.bot_urls)
        if target == "next":
            return [self.bot_urls[next(self._turn) % len(self.bot_urls)]]
        if not 0 <= target < len(self.bot_urls):
            raise IndexError(f"no bot endpoint {target!r}: there are {len(self.bot_urls)}")
        return [self.bot_urls[target]]

    @staticmethod
    async def _post(
        session: aiohttp.ClientSession, url: str, body: str, headers: Mapping[str, str]
    ) -> BotResponse:
        async with session.post(url, data=body.encode(), headers=headers) as response:
            return BotResponse(status=response.status, body=await response.text(), url=url)


class _ApiError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


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


def _json_arg(args: Mapping[str, Any], key: str) -> Any:
    value = args.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            raise _ApiError("invalid_arguments") from None
    return value


def _text_and_blocks(args: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    blocks = _json_arg(args, "blocks") or []
    if not isinstance(blocks, list):
        raise _ApiError("invalid_blocks")
    text = str(args.get("text") or "")
    if not text and not blocks:
        raise _ApiError("no_text")
    return text, blocks


def _elements(blocks: list[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    for block in blocks:
        if block.get("type") == "actions":
            for element in block.get("elements", []):
                yield block, element
        elif block.get("type") in {"section", "input"}:
            element = block.get("accessory") or block.get("element")
            if element:
                yield block, element


def _find_element(
    blocks: list[dict[str, Any]], action_id: str, value: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    found = [(b, e) for b, e in _elements(blocks) if e.get("action_id") == action_id]
    if len(found) > 1 and value is not None:
        found = [(b, e) for b, e in found if e.get("value") == value] or found
    if not found:
        ids = sorted({str(e.get("action_id")) for _, e in _elements(blocks)})
        raise KeyError(f"no element with action_id {action_id!r}; the message has {ids!r}")
    return found[0]


def _all_options(element: Mapping[str, Any]) -> list[dict[str, Any]]:
    options = list(element.get("options", []))
    for group in element.get("option_groups", []):
        options.extend(group.get("options", []))
    return options


def _find_option(element: Mapping[str, Any], pick: str) -> dict[str, Any]:
    for option in _all_options(element):
        if option.get("value") == pick or option.get("text", {}).get("text") == pick:
            return dict(option)
    raise KeyError(f"{element.get('type')} {element.get('action_id')!r} offers no option {pick!r}")


def _input_state(element: Mapping[str, Any], value: Any) -> dict[str, Any]:
    kind = str(element.get("type"))
    if kind in {"plain_text_input", "email_text_input", "url_text_input"}:
        return {"type": kind, "value": None if value is None else str(value)}
    if kind == "number_input":
        return {"type": kind, "value": None if value is None else str(value)}
    if kind == "datepicker":
        return {"type": kind, "selected_date": value}
    if kind in {"static_select", "radio_buttons"}:
        option = None if value is None else _find_option(element, str(value))
        return {"type": kind, "selected_option": option}
    if kind in {"multi_static_select", "checkboxes"}:
        picks = [] if value is None else [value] if isinstance(value, str) else list(value)
        return {"type": kind, "selected_options": [_find_option(element, p) for p in picks]}
    raise ValueError(f"LocalSlack cannot fill a {kind!r} input")
