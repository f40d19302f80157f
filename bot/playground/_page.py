"""The playground page: static files, a small JSON API over the local workspace, and live updates.

The page never talks to the bot: it asks the workspace (LocalSlack) to do what a person in Slack
would do, and LocalSlack sends the bot the signed events and interactivity payloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._slack import BotResponse, Change
from ._workspace import Person, PlaygroundSlack

__all__ = ["PageConfig", "PageServer"]

_STATIC = {
    "playground.html": "text/html",
    "playground.js": "text/javascript",
    "playground.css": "text/css",
}
_QUIET_CHANGES = frozenset({"call", "rate_limited"})
"""Changes the page cannot see; every Web API call is one, so they would only cost refreshes."""
_HEARTBEAT_SECONDS = 15.0


@dataclass(kw_only=True, frozen=True)
class PageConfig:
    """What the page shows besides the workspace itself."""

    model_label: str
    offline: bool
    """True when the offline demo model answers; the page labels it so."""
    people: Sequence[Person]
    channel: str
    """The channel the page opens on."""
    examples: Sequence[str] = ()
    """Messages to try, listed in the sidebar."""


class _Edge(BaseModel):
    # The page is a client like any other: its bodies are validated, unknown keys ignored.
    model_config = ConfigDict(extra="ignore")


class _PostMessage(_Edge):
    user: str
    channel: str
    text: str = Field(min_length=1, max_length=40_000)
    thread_ts: str | None = None


class _Option(_Edge):
    value: str | None = None
    text: dict[str, Any] | None = None

    def pick(self) -> str:
        """What LocalSlack finds the option by: its value, else its label."""
        if self.value is not None:
            return self.value
        return str((self.text or {}).get("text", ""))


class _Action(_Edge):
    action_id: str
    block_id: str | None = None
    type: str
    value: str | None = None
    selected_option: _Option | None = None
    selected_options: list[_Option] | None = None

    def selected(self) -> str | list[str] | None:
        """What the click picked, as `LocalSlack.click` takes it."""
        if self.selected_options is not None:
            return [o.pick() for o in self.selected_options]
        if self.selected_option is not None:
            return self.selected_option.pick()
        return None


class _PostAction(_Edge):
    user: str
    channel: str
    message_ts: str
    ephemeral: bool = False
    action: _Action


class _HomeOpen(_Edge):
    user: str


class _HomeAction(_Edge):
    user: str
    action: _Action


class _InputState(_Edge):
    """One input element's state as the page sends it, in Slack's `state.values` shape."""

    value: str | None = None
    selected_date: str | None = None
    selected_option: _Option | None = None
    selected_options: list[_Option] | None = None


class _SubmitView(_Edge):
    user: str
    view_id: str
    values: dict[str, dict[str, _InputState]] = Field(default_factory=dict)
    """Slack's `state.values` shape: block_id -> action_id -> element state."""


class _Stop(_Edge):
    user: str
    channel: str
    thread_ts: str


class _CloseView(_Edge):
    user: str
    view_id: str


_M = TypeVar("_M", bound=_Edge)


class _BadRequest(Exception):
    pass


class PageServer:
    """Serves the page and its API for one workspace; an async context manager."""

    def __init__(
        self,
        slack: PlaygroundSlack,
        config: PageConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.slack = slack
        self.config = config
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None
        self._closing = asyncio.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/favicon.ico", self._no_icon)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/events", self._events)
        app.router.add_post("/api/messages", self._post_message)
        app.router.add_post("/api/actions", self._post_action)
        app.router.add_post("/api/views/submit", self._submit_view)
        app.router.add_post("/api/views/close", self._close_view)
        app.router.add_post("/api/stop", self._stop)
        app.router.add_post("/api/home/open", self._open_home)
        app.router.add_post("/api/home/actions", self._home_action)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def __aenter__(self) -> PageServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._runner is not None:
            return
        self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def aclose(self) -> None:
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _on_shutdown(self, app: web.Application) -> None:
        # Live-update streams never end on their own; they watch this to let shutdown finish.
        self._closing.set()

    # ------------------------------------------------------------------ files

    async def _index(self, request: web.Request) -> web.Response:
        return self._file("playground.html")

    async def _no_icon(self, request: web.Request) -> web.Response:
        return web.Response(status=204)

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in _STATIC:
            raise web.HTTPNotFound()
        return self._file(name)

    def _file(self, name: str) -> web.Response:
        text = resources.files(__package__).joinpath(name).read_text(encoding="utf-8")
        return web.Response(
            text=text,
            content_type=_STATIC[name],
            headers={
                "Cache-Control": "no-store",
                # Defence in depth for the XSS-safe rendering: no inline or foreign scripts.
                "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'",
            },
        )

    # ------------------------------------------------------------------ state

    def state(self, viewer: str | None) -> dict[str, Any]:
        """Everything the page draws, as the person `viewer` sees it."""
        slack = self.slack
        roles = {p.id: p.role for p in self.config.people}
        people_ids = [p.id for p in self.config.people if p.id in slack.users]
        # Only a person can be acted as: the bot's own id would make every post a refusal.
        person = viewer is not None and viewer in slack.users and not slack.users[viewer].is_bot
        user = viewer if person else (people_ids[0] if people_ids else None)
        users = [
            {
                "id": u.id,
                "name": u.name,
                "real_name": u.name,
                "is_bot": u.is_bot,
                "role": roles.get(u.id, ""),
            }
            for u in slack.users.values()
        ]
        return {
            "model": {"label": self.config.model_label, "offline": self.config.offline},
            "bot_user_id": slack.bot_user_id,
            "users": users,
            "channels": [
                {"id": c.id, "name": c.name} for c in slack.channels.values() if not c.is_im
            ],
            "default_user": user,
            "default_channel": self.config.channel,
            "examples": list(self.config.examples),
            "messages": slack.page_messages(user) if user else [],
            "views": [
                {"id": v.id, "user": v.user, "hash": v.hash, "view": v.view}
                for v in slack.views.values()
                if not v.closed and v.user == user
            ],
            "home": slack.home_views.get(user) if user else None,
            "statuses": slack.latest_statuses(),
            "seq": slack.last_seq,
        }

    async def _state(self, request: web.Request) -> web.Response:
        return web.json_response(self.state(request.query.get("user")))

    # ------------------------------------------------------------ live updates

    async def _events(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        queue = self.slack.subscribe()
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await response.write(b"retry: 1000\n\n")
            while not self._closing.is_set():
                getting = asyncio.ensure_future(queue.get())
                done, _ = await asyncio.wait(
                    {getting, closing},
                    timeout=_HEARTBEAT_SECONDS,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if getting not in done:
                    getting.cancel()
                    if not done:
                        await response.write(b": ping\n\n")
                    continue
                change: Change = getting.result()
                if change.kind in _QUIET_CHANGES:
                    continue
                data = json.dumps({"seq": change.seq, "kind": change.kind})
                await response.write(f"event: change\ndata: {data}\n\n".encode())
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            closing.cancel()
            self.slack.unsubscribe(queue)
        with contextlib.suppress(ConnectionResetError, ConnectionError):
            await response.write_eof()
        return response

    # ---------------------------------------------------------------- actions

    async def _post_message(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request, _PostMessage)
            self._check_user(body.user)
            if body.channel not in self.slack.channels:
                raise _BadRequest(f"no channel {body.channel!r}")
            if body.thread_ts is None and body.text.startswith("/"):
                # `/deploy api 2.3 prod` in the composer is a slash command, as in Slack.
                command, _, rest = body.text.partition(" ")
                answer = await self.slack.run_command(
                    body.user, body.channel, command, rest.strip()
                )
                return web.json_response({"ok": True, "command": command, "status": answer.status})
            # A new message in the channel addresses the bot, as the page's composer says; a
            # thread reply is plain, as in Slack, so it can answer a pending free-text question.
            message = await self.slack.post_user_message(
                body.user,
                body.channel,
                body.text,
                thread_ts=body.thread_ts,
                mention=body.thread_ts is None,
            )
        except _BadRequest as error:
            return _error(str(error))
        return web.json_response({"ok": True, "ts": message.ts})

    async def _stop(self, request: web.Request) -> web.Response:
        """The stop button of a thread's agent session: Slack sends `agent_session_stopped`."""
        try:
            body = await _read(request, _Stop)
            self._check_user(body.user)
            if self.slack.message(body.channel, body.thread_ts) is None:
                raise _BadRequest(f"no thread {body.thread_ts!r} in {body.channel!r}")
        except _BadRequest as error:
            return _error(str(error))
        answer = await self.slack.press_stop(body.user, body.channel, body.thread_ts)
        return _bot_answer(answer)

    async def _post_action(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request, _PostAction)
            self._check_user(body.user)
            # An ephemeral message is clicked as any (it is found among that person's own, as
            # Slack lets only them see it); `body.ephemeral` only says which the page showed.
            action = body.action
            selected = action.selected()
            try:
                answer = await self.slack.click(
                    body.user,
                    body.message_ts,
                    action.action_id,
                    value=action.value,
                    selected=selected,
                    channel=body.channel,
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def _open_home(self, request: web.Request) -> web.Response:
        """The person opens the app's Home tab: Slack sends `app_home_opened`."""
        try:
            body = await _read(request, _HomeOpen)
            self._check_user(body.user)
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(await self.slack.open_home(body.user))

    async def _home_action(self, request: web.Request) -> web.Response:
        """A click in the person's Home view, sent as Slack sends it (no channel)."""
        try:
            body = await _read(request, _HomeAction)
            self._check_user(body.user)
            action = body.action
            selected = action.selected()
            try:
                answer = await self.slack.click_home(
                    body.user,
                    action.action_id,
                    value=action.value,
                    selected=selected,
                    block_id=action.block_id,
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def _submit_view(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request, _SubmitView)
            self._check_user(body.user)
            values = {block_id: _typed(states) for block_id, states in body.values.items()}
            try:
                answer = await self.slack.submit_view(
                    body.user,
                    body.view_id,
                    {k: v for k, v in values.items() if v is not None},
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def _close_view(self, request: web.Request) -> web.Response:
        try:
            body = await _read(request, _CloseView)
            self._check_user(body.user)
            try:
                await self.slack.close_view(body.user, body.view_id)
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return web.json_response({"ok": True})

    def _check_user(self, user: str) -> None:
        known = self.slack.users.get(user)
        if known is None or known.is_bot:
            raise _BadRequest(f"no person {user!r} in this workspace")


async def _read(request: web.Request, model: type[_M]) -> _M:
    try:
        return model.model_validate(await request.json())
    except (ValidationError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _BadRequest(f"bad request body: {error}") from None
    except RecursionError:
        raise _BadRequest("bad request body: nested too deeply") from None


def _typed(states: dict[str, _InputState]) -> str | list[str] | None:
    """One input's Slack element state as LocalSlack fills it: text, a date, option value(s)."""
    for state in states.values():
        if state.selected_options is not None:
            return [option.pick() for option in state.selected_options]
        if state.selected_option is not None:
            return state.selected_option.pick()
        for entered in (state.value, state.selected_date):
            if entered is not None:
                return entered
    return None


def _reason(error: Exception) -> str:
    # KeyError's str() adds quotes around the message.
    return str(error.args[0]) if error.args else type(error).__name__


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


def _bot_answer(answer: BotResponse) -> web.Response:
    """The bot's reply to an interactivity payload, for the page (errors under a modal's inputs)."""
    body: Any = None
    if answer.body.strip():
        try:
            body = answer.json()
        except json.JSONDecodeError:
            body = None
    out: dict[str, Any] = {"ok": answer.status == 200, "status": answer.status}
    if isinstance(body, dict):
        if "response_action" in body:
            out["response_action"] = body["response_action"]
        if isinstance(body.get("errors"), dict):
            out["errors"] = body["errors"]
    return web.json_response(out, status=200 if answer.status == 200 else 502)
