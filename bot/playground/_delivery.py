"""How LocalSlack reaches the bot: requests signed as Slack signs them, POSTed to its endpoints,
or envelopes over the Socket Mode WebSocket the bot opened."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from ._workspace_model import Workspace

__all__ = ["BotResponse", "HttpDelivery", "SocketMode", "Target"]

Target = int | Literal["next", "all"]
"""Which bot endpoint gets a delivery: one by index, the next one in turn, or every one at once
(as when Slack retries an event and each attempt lands on another process behind a balancer)."""


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


class HttpDelivery:
    """Signs request bodies with the app's signing secret and POSTs them to bot endpoints.

    `open` it before the first `post` and `close` it when done.
    """

    def __init__(self, signing_secret: str) -> None:
        self._verifier = SignatureVerifier(signing_secret)
        self._turn = itertools.count()
        self._session: aiohttp.ClientSession | None = None

    def open(self) -> None:
        self._session = aiohttp.ClientSession()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(
        self,
        urls: Sequence[str],
        target: Target,
        body: str,
        *,
        headers: Mapping[str, str] | None,
        sign: bool,
        timestamp: int | None,
        signature: str | None,
    ) -> BotResponse:
        """POST `body` to the `target` among `urls` (see `LocalSlack.send_raw`)."""
        targets = self._targets(urls, target)
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

    def _targets(self, urls: Sequence[str], target: Target) -> list[str]:
        if not urls:
            raise RuntimeError("set `bot_url` to the bot's /slack/events URL first")
        if target == "all":
            return list(urls)
        if target == "next":
            return [urls[next(self._turn) % len(urls)]]
        if not 0 <= target < len(urls):
            raise IndexError(f"no bot endpoint {target!r}: there are {len(urls)}")
        return [urls[target]]

    @staticmethod
    async def _post(
        session: aiohttp.ClientSession, url: str, body: str, headers: Mapping[str, str]
    ) -> BotResponse:
        async with session.post(url, data=body.encode(), headers=headers) as response:
            return BotResponse(status=response.status, body=await response.text(), url=url)


class SocketMode:
    """Slack's end of Socket Mode: accepts the bot's WebSocket connections, sends envelopes over
    the newest one and waits for their acks; connects and disconnects show on the change feed."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future[Any]] = {}

    @property
    def connected(self) -> bool:
        return any(not socket.closed for socket in self._sockets)

    async def close(self) -> None:
        for socket in list(self._sockets):
            await socket.close()

    async def handle(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse(autoping=True)
        await socket.prepare(request)
        self._sockets.append(socket)
        await socket.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "localslack", "approximate_connection_time": 3600},
                "connection_info": {"app_id": self.workspace.api_app_id},
            }
        )
        await self.workspace.publish("call", {"method": "socket_mode.connected"})
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
            await self.workspace.publish("call", {"method": "socket_mode.disconnected"})
        return socket

    async def send(
        self,
        kind: Literal["events_api", "interactive", "slash_commands"],
        payload: dict[str, Any],
        retry: int,
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
                "accepts_response_payload": kind != "events_api",
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
