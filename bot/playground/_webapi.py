"""The Slack Web API the bot calls, served from LocalSlack's workspace: token checks, injected
failures (rate limits), and each method's handler, answering as Slack answers.

Each method is first checked against the workspace's rules (`_rules`: scopes, expiring triggers,
the rate-limit profile). Its handler, by concept: `chat.*` and `reactions.*` (`_webapi_chat`),
`views.*` (`_webapi_views`), the agent methods (`_webapi_agents`), reads of conversations and
people (`_webapi_conversations`); how they read their arguments is `_webapi_args`. Blocks and
views are checked against Slack's limits (`_limits`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from ._limits import Refusal, ValidateKind, validate
from ._rules import HISTORY_SCOPES, METHOD_SCOPES
from ._webapi_agents import AGENT_METHOD_HANDLERS, AGENT_METHODS
from ._webapi_args import Handler, _ApiError, _ScopeMissing, channel_of, json_arg, read_args
from ._webapi_chat import CHAT_METHODS
from ._webapi_conversations import CONVERSATIONS_METHODS
from ._webapi_views import VIEWS_METHODS
from ._workspace_model import ApiCall, Workspace

__all__ = ["WebApi"]

# How a call's arguments are read, under the name the tests' failing Web API imports it by.
_read_args = read_args


class WebApi:
    """Serves `/api/{method}` from `workspace`, recording each call in `workspace.calls`.

    `socket_url` gives `apps.connections.open` the Socket Mode URL to hand the bot.
    """

    def __init__(self, workspace: Workspace, *, socket_url: Callable[[], str]) -> None:
        self.workspace = workspace
        self._socket_url = socket_url
        self._methods: dict[str, Handler] = {
            "auth.test": _auth_test,
            "blocks.validate": _blocks_validate,
            **CHAT_METHODS,
            **VIEWS_METHODS,
            **AGENT_METHOD_HANDLERS,
            **CONVERSATIONS_METHODS,
        }

    async def handle(self, request: web.Request) -> web.Response:
        ws = self.workspace
        method = request.match_info["method"]
        try:
            args = await read_args(request)
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
        wait = ws.rate_limits.retry_after(method, channel_of(args), ws.clock())
        if wait is not None:
            ws.calls[-1].status = 429
            await ws.publish("rate_limited", {"method": method, "status": 429})
            return web.json_response(
                {"ok": False, "error": "ratelimited"},
                status=429,
                headers={"Retry-After": str(wait)},
            )
        try:
            body = await handler(ws, args)
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


async def _auth_test(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "url": "http://localslack/",
        "team": "local",
        "user": "handback",
        "team_id": ws.team_id,
        "user_id": ws.bot_user_id,
        "bot_id": ws.bot_id,
        "is_enterprise_install": False,
    }


async def _blocks_validate(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    """`blocks.validate` (no scope needed): exactly one of `blocks`, `message`, `view`."""
    given: list[ValidateKind] = [k for k in ("blocks", "message", "view") if k in args]
    if len(given) != 1:
        raise Refusal(
            error="invalid_arguments",
            messages=["must provide exactly one of `blocks`, `view`, or `message`"],
        )
    validate(given[0], json_arg(args, given[0]))
    return {}
