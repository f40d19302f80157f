"""`SlackBot`: the Bolt app that runs an agent for Slack mentions and DMs, and resumes it on clicks.

Every listener acks at once and hands its work to a tracked background task, so Slack always gets
its answer within 3 seconds; `drain()` waits for that work, which is how tests avoid sleeping.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

from aiohttp import web
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import FixedValueRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

import blocks
from state import InteractionRecord, Store

from .. import Agent
from ._answers import Answers
from ._chat import Chat
from ._conversation import Conversations, Thread
from ._expiry import Sweeper
from ._policy import AnswerPolicy, GroupMembers, slack_group_members
from ._settings import Settings
from ._tasks import Background

__all__ = ["SlackBot", "make_client"]

log = logging.getLogger("handback.slack")

_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast"})
"""Message subtypes that are still a person talking; every other subtype (edits, deletions,
joins, bot messages) is not a prompt."""


_BOLT_LOG = logging.getLogger("handback.bolt")

_SORRY = "Sorry, something went wrong on my side. The details are in the bot's log."

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
        sweep: bool = True,
    ) -> None:
        self.agent = agent
        self.store = store
        self.settings = settings
        self.clock = clock
        # Runs and interactions must share one store, so the agent's is replaced by the app's.
        agent.store = store
        self.client = client or make_client(settings)
        self.chat = Chat(self.client)
        self.tasks = Background()
        self.policy = AnswerPolicy(
            approvers=tuple(settings.handback_approvers),
            tool_approvers={k: tuple(v) for k, v in settings.handback_tool_approvers.items()},
            answerers=tuple(settings.handback_answerers),
            allow_self_approval=settings.handback_allow_self_approval,
        )
        members = members or slack_group_members(self.client)
        self.conversations = Conversations(
            agent=agent,
            store=store,
            chat=self.chat,
            ttl=settings.handback_interaction_ttl,
            clock=clock,
            policy=self.policy,
            members=members,
            lease_ttl=settings.handback_thread_lease_ttl,
        )
        self.sweeper = Sweeper(
            store=store,
            conversations=self.conversations,
            interval=settings.handback_sweep_interval,
            clock=clock,
        )
        self.answers = Answers(
            store=store,
            chat=self.chat,
            conversations=self.conversations,
            policy=self.policy,
            members=members,
            expire=self._expire_later,
            clock=clock,
        )
        self._sweep = sweep
        self._thread_tails: dict[tuple[str, str], asyncio.Task[Any]] = {}
        """The last piece of work queued for each thread."""
        self._sweeper_task: asyncio.Task[None] | None = None
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
        if self._sweep and self._sweeper_task is None:
            self._sweeper_task = asyncio.create_task(
                self.sweeper.run_forever(), name="handback-sweeper"
            )
        self.tasks.spawn(self.answers.recover(), name="recover")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sweeper_task is not None:
            self._sweeper_task.cancel()
            await asyncio.gather(self._sweeper_task, return_exceptions=True)
        await self.tasks.aclose()
        session = getattr(self.client, "session", None)
        if session is not None and not session.closed:
            await session.close()

    async def drain(self) -> None:
        """Wait until every piece of work started by requests so far has finished."""
        await self.tasks.drain()

    async def _expire_later(self, record: InteractionRecord) -> None:
        self.tasks.spawn(self.sweeper.expire(record), name=f"expire-{record.interaction_id}")

    # ----------------------------------------------------------------- serving

    def web_app(self) -> web.Application:
        """The aiohttp application: `POST /slack/events` (events and interactivity), `GET
        /healthz`."""
        application = self.app.web_app(path="/slack/events")
        application.router.add_get("/healthz", self._healthz)
        return application

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"ok": True, "agent": self.agent.name, "busy": self.tasks.busy})

    @asynccontextmanager
    async def serve_http(self, host: str, port: int) -> AsyncIterator[str]:
        """Serve HTTP mode; yields the events URL (port 0 picks a free port)."""
        runner = web.AppRunner(self.web_app(), access_log=None)
        await runner.setup()
        try:
            site = web.TCPSite(runner, host, port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            bound = int(sockets[0].getsockname()[1]) if sockets else port
            shown = "127.0.0.1" if host in {"0.0.0.0", ""} else host
            yield f"http://{shown}:{bound}/slack/events"
        finally:
            await runner.cleanup()

    async def run_socket_mode(self, app_token: str, stop: asyncio.Event) -> None:
        """Connect over Socket Mode and handle requests until `stop` is set."""
        from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

        handler = AsyncSocketModeHandler(self.app, app_token)
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

        @app.event("app_mention")
        async def on_mention(body: dict[str, Any], context: AsyncBoltContext) -> None:
            self._take_event(body, context, mention=True)

        @app.event("message")
        async def on_message(body: dict[str, Any], context: AsyncBoltContext) -> None:
            self._take_event(body, context, mention=False)

        @app.action(blocks.ACTION_PATTERN)
        async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack()
            self.tasks.spawn(self._on_click(body), name="action")

        @app.view(blocks.CALLBACK_PATTERN)
        async def on_view(ack: AsyncAck, body: dict[str, Any]) -> None:
            check = await self.answers.check_submission(body)
            if check.errors:
                await ack(response_action="errors", errors=check.errors)
                return
            await ack()
            if check.record is not None:
                record = check.record
                user = str(body["user"]["id"])
                self.tasks.spawn(
                    self._on_modal_answer(record, user=user, answer=check.answer), name="modal"
                )
            elif check.notice:
                log.info("modal submission refused: %s", check.notice)

    def _take_event(
        self, body: dict[str, Any], context: AsyncBoltContext, *, mention: bool
    ) -> None:
        event = body.get("event") or {}
        bot_user_id = context.get("bot_user_id")
        if _not_a_prompt(event, bot_user_id, mention=mention):
            return
        # Messages of one thread are handled in the order they arrived: a quick follow-up
        # continues from the run before it instead of racing it.
        key = (str(event["channel"]), str(event.get("thread_ts") or event["ts"]))
        work = self._on_message(body, event, bot_user_id, mention=mention)
        task = self.tasks.spawn(_after(self._thread_tails.get(key), work), name="event")
        self._thread_tails[key] = task

        def forget(done: asyncio.Task[Any]) -> None:
            if self._thread_tails.get(key) is done:
                del self._thread_tails[key]

        task.add_done_callback(forget)

    # The handlers below are where work started after an ack ends: whatever still goes wrong
    # (the store down, a bug) is logged in full and told to the person in one plain sentence, so
    # a click or a message never just vanishes.

    async def _on_click(self, body: dict[str, Any]) -> None:
        try:
            await self.answers.on_action(body)
        except Exception:
            log.exception("could not handle a click")
            user = str((body.get("user") or {}).get("id") or "")
            channel = str((body.get("channel") or {}).get("id") or "")
            if user and channel:
                await self.chat.ephemeral(channel, user, _SORRY)

    async def _on_modal_answer(self, record: InteractionRecord, *, user: str, answer: Any) -> None:
        try:
            await self.answers.accept(record, user=user, answer=answer)
        except Exception:
            log.exception("could not take the answer to %s", record.interaction_id)
            if record.channel:
                await self.chat.ephemeral(record.channel, user, _SORRY, thread_ts=record.thread_ts)

    async def _on_message(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        bot_user_id: str | None,
        *,
        mention: bool,
    ) -> None:
        try:
            await self._on_person_message(body, event, bot_user_id, mention=mention)
        except Exception:
            log.exception("could not handle event %s", body.get("event_id"))
            channel = str(event["channel"])
            await self.chat.post(
                channel, _SORRY, thread_ts=str(event.get("thread_ts") or event["ts"])
            )

    async def _on_person_message(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        bot_user_id: str | None,
        *,
        mention: bool,
    ) -> None:
        event_id = body.get("event_id")
        # Slack redelivers an event it thinks timed out; Bolt does not de-duplicate.
        if event_id and not await self.store.first_delivery(str(event_id)):
            log.info("ignoring a repeated delivery of %s", event_id)
            return
        channel = str(event["channel"])
        ts = str(event["ts"])
        in_thread = event.get("thread_ts")
        is_dm = event.get("channel_type") == "im"
        thread = Thread(
            channel=channel, thread_ts=str(in_thread or ts), requester=str(event.get("user"))
        )
        # A plain channel message only matters inside a thread the bot already talks in.
        if (
            not mention
            and not is_dm
            and (not in_thread or await self.store.get_thread_run(channel, str(in_thread)) is None)
        ):
            return
        text = _without_mention(str(event.get("text") or ""), bot_user_id)
        user = str(event["user"])
        if in_thread and (
            await self.answers.on_thread_reply(thread, user=user, text=text)
            or await self.answers.holds_thread(thread, user=user)
        ):
            return
        if not text:
            text = "Hello!"
        await self.conversations.start(thread, text=text, message_ts=ts)


async def _after(before: asyncio.Task[Any] | None, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` once `before` has finished, however it finished."""
    try:
        if before is not None:
            await asyncio.wait([before])
    except BaseException:
        work.close()
        raise
    await work


def _not_a_prompt(event: dict[str, Any], bot_user_id: str | None, *, mention: bool) -> bool:
    """True for events that must not start or continue a run."""
    if event.get("bot_id") or event.get("bot_profile"):
        return True
    user = event.get("user")
    if not user or user == bot_user_id:
        return True
    subtype = event.get("subtype")
    if subtype and subtype not in _PERSON_SUBTYPES:
        return True
    if not event.get("channel") or not event.get("ts"):
        return True
    # A channel message that mentions the bot also arrives as `app_mention`; take that one.
    return bool(
        not mention
        and event.get("channel_type") != "im"
        and bot_user_id
        and _mention_of(bot_user_id).search(str(event.get("text") or ""))
    )


def _mention_of(bot_user_id: str) -> re.Pattern[str]:
    """`<@U…>`, and the labelled `<@U…|name>` that some clients and API posts still send."""
    return re.compile(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>")


def _without_mention(text: str, bot_user_id: str | None) -> str:
    if bot_user_id:
        text = _mention_of(bot_user_id).sub("", text)
    return text.strip()
