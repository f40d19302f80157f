"""`SlackBot`: the Bolt app that runs an agent for Slack mentions and DMs, and resumes it on clicks.

This module wires the parts together and runs their lifecycle and serving: the listeners
(`_listeners.py`) record what Slack sent in the store's inbox before they ack (`_record.py`),
and the inbox worker (`_worker.Worker`, in this process or another) does the work. `drain()`
runs the inbox until idle, which is how tests avoid sleeping.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Literal

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

from state import InteractionRecord, Store

from .. import Agent, UsageError, _metrics
from ._admission import CheckedSocketModeHandler
from ._answers import Answers
from ._chat import Chat
from ._conversation import Conversations
from ._dispatch import Dispatch
from ._expiry import Sweeper
from ._home import Home
from ._listeners import Listeners
from ._liveness import Liveness
from ._nudges import Nudges
from ._policy import AnswerPolicy, GroupMembers, fresh_group_members, slack_group_members
from ._record import Recorder
from ._settings import Settings
from ._stops import StopCheck
from ._tasks import Background
from ._verify import SlackGate
from ._visibility import Visibility
from ._worker import Worker

__all__ = ["Role", "SlackBot", "make_client"]

Role = Literal["all", "web", "worker"]
"""`web` verifies, records and acks; `worker` works the inbox; `all` (the default) does both."""

_BOLT_LOG = logging.getLogger("handback.bolt")

_SERVER_ERROR_PAUSE = 0.3
"""Seconds before retrying a Web API call Slack answered with 500 or 503."""


def _drop_token_warning(record: logging.LogRecord) -> bool:
    # Bolt reads SLACK_BOT_TOKEN from the environment itself and then warns that the client we
    # built from the very same token wins; that is the intent, not a problem to report.
    return record.getMessage() != warning_client_prioritized_and_token_skipped()


def make_client(settings: Settings) -> AsyncWebClient:
    """The Web API client: `SLACK_API_URL`, and retries on 429 (`Retry-After`), resets, and
    one retry on a 500/503 (a card lost to a passing Slack outage leaves a run nobody can
    answer)."""
    return AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.slack_api_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
            AsyncServerErrorRetryHandler(
                max_retry_count=1,
                interval_calculator=FixedValueRetryIntervalCalculator(_SERVER_ERROR_PAUSE),
            ),
        ],
    )


class SlackBot:
    """The Slack app for one agent and one store.

    Use it as an async context manager (it starts the expiry sweeper and recovers runs answered
    before a crash), then serve it with `serve_http()` or `run_socket_mode()`.
    """

    def __init__(
        self,
        *,
        agent: Agent,
        store: Store,
        settings: Settings,
        client: AsyncWebClient | None = None,
        clock: Callable[[], float] = time.time,
        members: GroupMembers | None = None,
        loops: bool = True,
        role: Role = "all",
    ) -> None:
        self.agent = agent
        self.store = store
        self.settings = settings
        self.clock = clock
        # Runs and interactions must share one store: an agent without one uses the app's while
        # the app is open, and an agent with another is refused rather than moved behind its back.
        self._lent = agent.store is None
        """Whether the agent had no store and uses this app's until the app closes."""
        if agent.store is None:
            agent.store = store
        elif agent.store is not store:
            given = "another store object on it" if repr(agent.store) == repr(store) else store
            raise UsageError(
                f"agent `{agent.name}` saves its runs in {agent.store!r}, but the app was given "
                f"{given!s}: pass the same store object to both, or none to the `Agent`"
            )
        self.client = client or make_client(settings)
        self.chat = Chat(self.client, ui=settings.handback_slack_ui)
        self.tasks = Background()
        self.policy = AnswerPolicy(
            approvers=tuple(settings.handback_approvers),
            tool_approvers={k: tuple(v) for k, v in settings.handback_tool_approvers.items()},
            answerers=tuple(settings.handback_answerers),
            allow_self_approval=settings.handback_allow_self_approval,
        )
        # Injected members (tests) are read as given; Slack's are cached for clicks, and read
        # fresh (at most seconds old) when a claim or a resume checks its approvals again.
        fresh = members or fresh_group_members(self.client, clock=clock)
        members = members or slack_group_members(self.client)
        self.liveness = Liveness(
            store, ttl=settings.handback_liveness_ttl, stall_limit=settings.handback_stall_limit
        )
        """This process's heartbeat: it keeps the work items and thread turns it runs."""
        self.conversations = Conversations(
            agent=agent,
            store=store,
            chat=self.chat,
            ttl=settings.handback_interaction_ttl,
            clock=clock,
            policy=self.policy,
            members=members,
            liveness=self.liveness,
        )
        # A grant is used only if its giver may approve now, read as the resume's re-check
        # reads it: otherwise the thread is told a call runs that the re-check then withdraws.
        self.conversations.grants.members = fresh
        nudges = Nudges(store=store, chat=self.chat, policy=self.policy, clock=clock)
        self.sweeper = Sweeper(
            store=store,
            conversations=self.conversations,
            interval=settings.handback_sweep_interval,
            clock=clock,
            nudges=nudges,
        )
        self.visibility = Visibility(self.chat)
        self.home = Home(
            store=store,
            chat=self.chat,
            policy=self.policy,
            members=members,
            tasks=self.tasks,
            agent_name=agent.name,
            visibility=self.visibility,
            clock=clock,
        )
        self.conversations.cards.home_changed = self.home.changed
        nudges.changed = self.home.changed
        self.answers = Answers(
            store=store,
            chat=self.chat,
            conversations=self.conversations,
            policy=self.policy,
            members=members,
            fresh_members=fresh,
            expire=self._expire_later,
            clock=clock,
            home=self.home,
            visibility=self.visibility,
        )
        self.sweeper.recover = functools.partial(self.answers.recover, patient=True)
        self.stops = StopCheck(
            store=store, chat=self.chat, policy=self.policy, members=members, clock=clock
        )
        self.dispatch = Dispatch(
            store=store, chat=self.chat, answers=self.answers, conversations=self.conversations
        )
        self.worker = Worker(
            store=store,
            handle=self.dispatch.work,
            liveness=self.liveness,
            concurrency=settings.handback_concurrency,
        )
        self.role = role
        self._loops = loops
        """Whether `start()` runs the sweeper and the inbox worker; tests call `drain()` instead."""
        self._sweeper_task: asyncio.Task[None] | None = None
        self._worker_task: asyncio.Task[None] | None = None
        self._closed = False
        signing_secret = settings.slack_signing_secret
        _BOLT_LOG.addFilter(_drop_token_warning)
        self.app = AsyncApp(
            client=self.client,
            signing_secret=signing_secret.get_secret_value() if signing_secret else "",
            # Listeners only ack and hand off, so answering after them is still immediate, and
            # the hand-off is known to have happened when Slack gets its response.
            process_before_response=True,
            logger=_BOLT_LOG,
        )
        self.recorder = Recorder(
            inbox=store, kick=self.worker.kick if not loops and role != "web" else None
        )
        Listeners(
            agent=agent,
            store=store,
            chat=self.chat,
            recorder=self.recorder,
            answers=self.answers,
            dispatch=self.dispatch,
            stops=self.stops,
            home=self.home,
            tasks=self.tasks,
            clock=clock,
        ).register(self.app)

    # ------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> SlackBot:
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
            raise RuntimeError("this SlackBot was closed; make a new one")
        if getattr(self.client, "session", None) is None:
            # One HTTP session for every Web API call: without it slack_sdk opens a new
            # connection (TCP and TLS handshakes) per call.
            self.client.session = aiohttp.ClientSession()
        if self.role == "web":
            return
        await self.liveness.start()
        if self._loops and self._sweeper_task is None:
            self._sweeper_task = asyncio.create_task(
                self.sweeper.run_forever(), name="handback-sweeper"
            )
            self._worker_task = asyncio.create_task(
                self.worker.run_forever(), name="handback-worker"
            )
        self.tasks.spawn(self.answers.recover(), name="recover")

    async def aclose(self, *, grace: float | None = None) -> None:
        """Stop taking work, let running work finish for `grace` seconds (the setting
        `HANDBACK_SHUTDOWN_GRACE` by default), hand the rest back to the inbox, close."""
        if self._closed:
            return
        self._closed = True
        grace = self.settings.handback_shutdown_grace if grace is None else grace
        if self._sweeper_task is not None:
            self._sweeper_task.cancel()
            await asyncio.gather(self._sweeper_task, return_exceptions=True)
        await self.worker.stop(grace=grace)
        if self._worker_task is not None:
            await asyncio.gather(self._worker_task, return_exceptions=True)
        await self.tasks.aclose()
        await self.liveness.aclose()
        session = getattr(self.client, "session", None)
        if session is not None and not session.closed:
            await session.close()
        if self._lent and self.agent.store is self.store:
            self.agent.store = None  # lent for the app's life: the agent is as it was given

    async def drain(self) -> None:
        """Run the inbox and the work started by requests until nothing is left."""
        while True:
            await self.tasks.drain()
            ran = 0 if self.role == "web" else await self.worker.run_until_idle()
            if not ran and not self.tasks.busy:
                return

    async def _expire_later(self, record: InteractionRecord) -> None:
        self.tasks.spawn(self.sweeper.expire(record), name=f"expire-{record.interaction_id}")

    # ----------------------------------------------------------------- serving

    def web_app(self, *, health_only: bool = False) -> web.Application:
        """The aiohttp application: `POST /slack/events` (events and interactivity), `GET
        /healthz` and `GET /metrics` (Prometheus); a worker serves only the latter two.

        Every request to `/slack/events` is verified and its payload checked (`SlackGate`)
        before Bolt reads it.
        """
        application = web.Application(middlewares=[_metrics.http_middleware])
        application.router.add_get("/metrics", _metrics.metrics_handler(self.store))
        if not health_only:
            secret = self.settings.slack_signing_secret
            gate = SlackGate(secret.get_secret_value() if secret else None, self.app.async_dispatch)

            application.router.add_post("/slack/events", gate.handle)
        application.router.add_get("/healthz", self._healthz)
        return application

    async def _healthz(self, request: web.Request) -> web.Response:
        busy = self.tasks.busy + self.worker.busy
        return web.json_response(
            {"ok": True, "agent": self.agent.name, "role": self.role, "busy": busy}
        )

    @asynccontextmanager
    async def serve_http(
        self, host: str, port: int, *, health_only: bool = False
    ) -> AsyncIterator[str]:
        """Serve HTTP mode; yields the events URL (port 0 picks a free port). The garbage
        collector of the embedding process is left as it is (the CLI freezes its own heap)."""
        runner = web.AppRunner(self.web_app(health_only=health_only), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            bound = int(runner.addresses[0][1])
            shown = "127.0.0.1" if host in {"0.0.0.0", ""} else host
            yield f"http://{shown}:{bound}/slack/events"
        finally:
            await runner.cleanup()

    async def run_socket_mode(self, app_token: str, stop: asyncio.Event) -> None:
        """Connect over Socket Mode and handle requests until `stop` is set; payloads that do not
        fit are acked and never reach Bolt (`CheckedSocketModeHandler`)."""
        handler = CheckedSocketModeHandler(self.app, app_token)
        # slack_sdk retries a failing connection forever, so the first connect races `stop`:
        # a SIGTERM while Slack is out of reach still ends the process.
        connecting = asyncio.ensure_future(handler.connect_async())  # type: ignore[no-untyped-call]
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if connecting.done():
                connecting.result()
                await stopping
        finally:
            for task in (connecting, stopping):
                task.cancel()
            await asyncio.gather(connecting, stopping, return_exceptions=True)
            await handler.close_async()  # type: ignore[no-untyped-call]
