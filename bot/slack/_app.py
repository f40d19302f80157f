"""`SlackBot`: the Bolt app that runs an agent for Slack mentions and DMs, and resumes it on clicks.

Every listener writes what Slack sent to the store's inbox and only then acks, so nothing Slack
got a 200 for can be lost; the inbox worker (`_worker.Worker`, in this process or another) does
the work. `drain()` runs the inbox until idle, which is how tests avoid sleeping.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, Literal

import aiohttp
from aiohttp import web
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.response import BoltResponse
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

import blocks
from blocks import InvalidAnswer
from state import InteractionRecord, Store, StoreError

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import ThreadStop

from .. import Agent, UsageError, _metrics
from ._admission import CheckedSocketModeHandler
from ._answers import Answers
from ._bounded import within
from ._chat import Chat
from ._commands import audit_refusal, read_command, read_form_submission
from ._conversation import Conversations
from ._dispatch import NOT_RECORDED, Dispatch, mention_of
from ._edge_models import PersonEvent, home_opened, person_event, session_stopped
from ._expiry import Sweeper
from ._home import Home
from ._liveness import Liveness
from ._nudges import Nudges
from ._policy import AnswerPolicy, GroupMembers, fresh_group_members, slack_group_members
from ._settings import Settings
from ._stops import StopCheck, StopDecision
from ._tasks import Background
from ._verify import SlackGate
from ._visibility import Visibility
from ._worker import Worker

__all__ = ["Role", "SlackBot", "make_client"]

Role = Literal["all", "web", "worker"]
"""`web` verifies, records and acks; `worker` works the inbox; `all` (the default) does both."""

log = logging.getLogger("handback.slack")

_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast"})
"""Message subtypes that are still a person talking; every other subtype (edits, deletions,
joins, bot messages) is not a prompt."""


_BOLT_LOG = logging.getLogger("handback.bolt")

_ANY_COMMAND = re.compile(r"^/")
"""Every slash command reaches the listener, which refuses the ones no tool has."""

_OPEN_WAIT = 1.5
"""Seconds the ack of a command may wait for its form to open: Slack gives up after 3."""

_SERVER_ERROR_PAUSE = 0.3
"""Seconds before retrying a Web API call Slack answered with 500 or 503."""

_RECORD_WAIT = 2.0
"""Seconds the ack may wait for the inbox write: Slack gives up on a response after 3."""


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
        self._register()

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

    # --------------------------------------------------------------- listeners

    def _register(self) -> None:
        app = self.app
        # Bolt tries the listeners in the order they were added, building each one's arguments
        # as it goes (about 20 µs each): clicks, whose ack a person waits for, come first.

        @app.action(blocks.ACTION_PATTERN)
        async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self._take_action(ack, body)

        @app.view(blocks.CALLBACK_PATTERN)
        async def on_view(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self._take_view(ack, body)

        @app.command(_ANY_COMMAND)
        async def on_command(ack: AsyncAck, body: dict[str, Any]) -> None:
            await self._take_command(ack, body)

        @app.event("app_mention")
        async def on_mention(
            body: dict[str, Any], context: AsyncBoltContext
        ) -> BoltResponse | None:
            return await self._take_event(body, context, mention=True)

        @app.event("message")
        async def on_message(
            body: dict[str, Any], context: AsyncBoltContext
        ) -> BoltResponse | None:
            return await self._take_event(body, context, mention=False)

        @app.event("agent_session_stopped")
        async def on_stopped(body: dict[str, Any]) -> BoltResponse | None:
            return await self._take_stop(body)

        @app.event("app_home_opened")
        async def on_home_opened(body: dict[str, Any]) -> None:
            self._take_home_opened(body)

    # ------------------------------------------------------- the web side: record, then ack

    async def _record(
        self,
        kind: str,
        item: dict[str, Any],
        *,
        dedupe: str | None = None,
        about: str | None = None,
    ) -> bool:
        """Write work to the inbox within Slack's deadline; False when it could not be written.

        A repeat of an event already recorded counts as written: Slack gets its 200 and stops.
        A click names the interaction it is `about`, which the store reads with the write, so
        the worker checks it without a read of its own.
        """
        started = time.perf_counter()
        try:
            item_id = await within(
                _RECORD_WAIT,
                self.store.enqueue(
                    kind,
                    {"id": uuid.uuid4().hex, **item},
                    dedupe=dedupe,
                    about=about,
                ),
            )
        except (StoreError, TimeoutError) as error:
            log.warning("could not record a %s in the inbox: %s", kind, str(error) or "timed out")
            _metrics.STORE_ERRORS.labels(where="record").inc()
            _metrics.RECORDED.labels(kind=kind, outcome="not_recorded").inc()
            return False
        finally:
            _metrics.RECORD_SECONDS.labels(kind=kind).observe(time.perf_counter() - started)
        _metrics.RECORDED.labels(kind=kind, outcome="recorded" if item_id else "repeated").inc()
        if item_id is None:
            # Slack redelivers an event it thinks timed out; Bolt does not de-duplicate.
            log.info("ignoring a repeated delivery of %s", dedupe)
            return True
        if not self._loops and self.role != "web":
            self.worker.kick()
        return True

    async def _take_event(
        self, body: dict[str, Any], context: AsyncBoltContext, *, mention: bool
    ) -> BoltResponse | None:
        # The payload fits (the edge checked it, over HTTP or Socket Mode); this types it.
        event = person_event(body)
        bot_user_id = context.get("bot_user_id")
        if event is None or _not_a_prompt(event, bot_user_id, mention=mention):
            return None
        item = {"payload": body, "bot_user_id": bot_user_id, "mention": mention}
        event_id = body.get("event_id")
        if not await self._record("event", item, dedupe=str(event_id) if event_id else None):
            # Not a 2xx, so Slack delivers the event again later instead of it being lost.
            return BoltResponse(status=503, body="not recorded; please retry")
        return None

    async def _take_stop(self, body: dict[str, Any]) -> BoltResponse | None:
        """The stop button: checked first (its sender's workspace, and that they started the
        turn or may answer what it waits on), so a stop that is not theirs writes nothing; then
        the paused run the thread waits on is claimed for the stop (no answer, grant or
        recovery resumes it after this) and the stop mark goes in the store (the process
        running the turn, whichever it is, looks for it while the turn runs); the rest of the
        stop (cards, the session's status, the audit entry) is recorded as work like any event."""
        stopped = session_stopped(body)
        if stopped is None:
            return None
        event_id = str(body.get("event_id") or "")
        team = body.get("team_id")
        mark = ThreadStop(user=stopped.user, at=self.clock(), event_id=event_id)
        try:

            async def decide_and_mark() -> StopDecision:
                decision = await self.stops.decide(
                    stopped, team=team if isinstance(team, str) else None
                )
                if decision.refusal is None:
                    await self.store.stop_thread(stopped.channel, stopped.thread_ts, mark)
                else:
                    await self.stops.refused(stopped, decision)
                return decision

            decision = await within(_RECORD_WAIT, decide_and_mark())
        except (StoreError, TimeoutError) as error:
            log.warning("could not record a stop: %s", str(error) or "timed out")
            return BoltResponse(status=503, body="not recorded; please retry")
        self.tasks.spawn(self.stops.tell(stopped, decision), name="stop-told")
        if decision.refusal is not None:
            return None  # Acked, so Slack does not send it again.
        item = {
            "channel": stopped.channel,
            "thread_ts": stopped.thread_ts,
            "user": stopped.user,
            "run_id": decision.run_id if decision.claimed else None,
        }
        if not await self._record("stop", item, dedupe=event_id or None):
            return BoltResponse(status=503, body="not recorded; please retry")
        return None

    def _take_home_opened(self, body: dict[str, Any]) -> None:
        """Someone opened the Home tab: their view is published after the ack, from this
        process and not through the inbox. A lost view loses no work (the requests wait in the
        store and on their cards) and the next visit draws it again."""
        opened = home_opened(body)
        if opened is None or opened.tab != "home":
            return
        self.tasks.spawn(self.home.opened(opened.user), name="home-opened")

    async def _take_action(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        about: str | None = None
        try:
            action = blocks.parse_block_action(body)
        except InvalidAnswer:
            intent = None  # Recorded all the same: the worker refuses it, with an audit entry.
        else:
            intent = action.intent
            if action.action != blocks.ACTION_REVOKE:  # a revoke names a grant
                about = action.interaction_id
        if intent == "selection":
            await ack()  # Ticking options only changes the card's state; Submit reads it.
            return
        if intent == "open_modal":
            # The trigger to open a modal lives 3 seconds, so this process opens it; nothing is
            # answered or lost if it fails, and the person is told.
            await ack()
            self.tasks.spawn(self.dispatch.on_click(body, None), name="open-modal")
            return
        recorded = await self._record("action", {"payload": body}, about=about)
        await ack()
        if not recorded:
            self.tasks.spawn(self.dispatch.not_recorded(body), name="not-recorded")

    async def _take_command(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # Parsing is pure and quick. Text that does not make valid arguments opens the tool's
        # form, from here (the trigger lives 3 seconds; this is the one Slack call before the
        # ack, bounded); an unknown command, or a form Slack did not open, is answered in the
        # ack itself (ephemeral, with the usage). A command that can run is recorded first,
        # like a click.
        check = read_command(self.agent, body)
        if check.refusal is not None:
            if check.form is not None and await self._open_form(body["trigger_id"], check.form):
                await ack()
                return
            await ack(text=check.refusal)
            refusal = audit_refusal(
                self.store,
                user=str(body.get("user_id") or ""),
                detail=check.audited,
                at=self.clock(),
            )
            self.tasks.spawn(refusal, name="audit-command")
            return
        # One run per invocation: Slack gives each its own trigger_id.
        dedupe = f"command:{body['trigger_id']}"
        recorded = await self._record("command", {"payload": body}, dedupe=dedupe)
        if recorded:
            await ack()
        else:
            await ack(text=NOT_RECORDED)

    async def _open_form(self, trigger_id: str, view: dict[str, Any]) -> bool:
        try:
            return await asyncio.wait_for(self.chat.open_view(trigger_id, view), _OPEN_WAIT)
        except TimeoutError:
            log.warning("slack views_open took too long; answering with the usage")
            return False

    async def _take_command_form(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # Checked before the ack without a store read (the form says where it came from), so
        # errors show inline; a valid one is recorded as the command's work, once per view.
        check = read_form_submission(self.agent, body, team=await self.chat.team_id())
        if check.item is not None:
            if await self._record("command", check.item, dedupe=check.dedupe):
                await ack()
            elif check.retry_block is not None:
                await ack(response_action="errors", errors={check.retry_block: NOT_RECORDED})
            else:
                await ack()
            return
        if check.refusal is not None:
            log.info("command form refused: %s", check.refusal)
            user = body.get("user")
            refusal = audit_refusal(
                self.store,
                user=str(user.get("id") or "") if isinstance(user, dict) else "",
                detail=f"form: {check.refusal}",
                at=self.clock(),
            )
            self.tasks.spawn(refusal, name="audit-command-form")
        if check.errors:
            await ack(response_action="errors", errors=check.errors)
        else:
            await ack()

    async def _take_view(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        if body["view"]["callback_id"] == blocks.CALLBACK_COMMAND_MODAL:
            await self._take_command_form(ack, body)
            return
        # Checked before the ack so that errors can show inline in the modal; bounded, since
        # Slack waits 3 seconds at most.
        try:
            check = await within(_RECORD_WAIT, self.answers.check_submission(body))
        except (StoreError, TimeoutError) as error:
            log.warning("could not check a modal submission: %s", str(error) or "timed out")
            check = self.answers.not_recorded(body, NOT_RECORDED)
        if check.record is not None:
            record = check.record
            item = {
                "interaction_id": record.interaction_id,
                "user": str(body["user"]["id"]),
                "answer": check.answer,
                "teams": list(check.teams),
            }
            if not await self._record("view", item):
                check = self.answers.not_recorded(body, NOT_RECORDED)
        if check.errors:
            await ack(response_action="errors", errors=check.errors)
            return
        await ack()
        if check.notice:
            log.info("modal submission refused: %s", check.notice)


def _not_a_prompt(event: PersonEvent, bot_user_id: str | None, *, mention: bool) -> bool:
    """True for events that must not start or continue a run."""
    if event.bot_id or event.bot_profile:
        return True
    if not event.user or event.user == bot_user_id:
        return True
    if event.subtype and event.subtype not in _PERSON_SUBTYPES:
        return True
    if not event.channel or not event.ts:
        return True
    # A channel message that mentions the bot also arrives as `app_mention`; take that one.
    return bool(
        not mention
        and event.channel_type != "im"
        and bot_user_id
        and mention_of(bot_user_id).search(event.text or "")
    )
