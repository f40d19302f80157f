"""The playground page: static files, a small JSON API over the local workspace, and live updates.

The page never talks to the bot: it asks the workspace (LocalSlack) to do what a person in Slack
would do (`_page_actions`, with the bodies of `_page_bodies`), and LocalSlack sends the bot the
signed events and interactivity payloads. Live updates are `_page_feed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from ._page_actions import PageActions
from ._page_feed import stream_changes
from ._workspace import Person, PlaygroundSlack

__all__ = ["PageConfig", "PageServer"]

_STATIC = {
    "playground.html": "text/html",
    "playground.js": "text/javascript",
    "playground.css": "text/css",
}


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
        self._actions = PageActions(slack)
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
        app.router.add_post("/api/messages", self._actions.post_message)
        app.router.add_post("/api/actions", self._actions.post_action)
        app.router.add_post("/api/views/submit", self._actions.submit_view)
        app.router.add_post("/api/views/close", self._actions.close_view)
        app.router.add_post("/api/stop", self._actions.stop)
        app.router.add_post("/api/home/open", self._actions.open_home)
        app.router.add_post("/api/home/actions", self._actions.home_action)
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

    async def _events(self, request: web.Request) -> web.StreamResponse:
        return await stream_changes(request, self.slack, self._closing)
