"""The Bolt listeners: each one checks what Slack sent, records it as work, then acks.

Clicks, events, stops and commands are written to the inbox before the ack (`_record.py`), so
nothing Slack got a 200 for is lost; only what must happen within Slack's 3 seconds (a modal
opened with its trigger, a form's inline errors, a Home tab drawn) happens here.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.response import BoltResponse

import blocks
from blocks import InvalidAnswer
from state import StoreError

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import StopWork

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import ThreadStop

from .. import Agent
from ._answers import Answers
from ._bounded import within
from ._chat import Chat
from ._commands import audit_refusal, read_command, read_form_submission
from ._dispatch import NOT_RECORDED, Dispatch, mention_of
from ._edge_models import PersonEvent, home_opened, person_event, session_stopped
from ._home import Home
from ._record import RECORD_WAIT, Recorder
from ._stops import StopCheck, StopDecision
from ._tasks import Background

__all__ = ["Listeners"]

log = logging.getLogger("handback.slack")

_PERSON_SUBTYPES = frozenset({"file_share", "thread_broadcast"})
"""Message subtypes that are still a person talking; every other subtype (edits, deletions,
joins, bot messages) is not a prompt."""

_ANY_COMMAND = re.compile(r"^/")
"""Every slash command reaches the listener, which refuses the ones no tool has."""

_OPEN_WAIT = 1.5
"""Seconds the ack of a command may wait for its form to open: Slack gives up after 3."""


class Listeners:
    """What the app does with each request Slack sends it, up to the ack."""

    def __init__(
        self,
        *,
        agent: Agent,
        store: StopWork,
        chat: Chat,
        recorder: Recorder,
        answers: Answers,
        dispatch: Dispatch,
        stops: StopCheck,
        home: Home,
        tasks: Background,
        clock: Callable[[], float],
    ) -> None:
        self.agent = agent
        self.store = store
        """Where a stop's mark goes, and the audit entries of refused commands."""
        self.chat = chat
        self.recorder = recorder
        self.answers = answers
        self.dispatch = dispatch
        self.stops = stops
        self.home = home
        self.tasks = tasks
        self.clock = clock

    def register(self, app: AsyncApp) -> None:
        """Add the listeners to `app`."""
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

    # ------------------------------------------------------------ record, then ack

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
        dedupe = str(event_id) if event_id else None
        if not await self.recorder.record("event", item, dedupe=dedupe):
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

            decision = await within(RECORD_WAIT, decide_and_mark())
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
        if not await self.recorder.record("stop", item, dedupe=event_id or None):
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
        recorded = await self.recorder.record("action", {"payload": body}, about=about)
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
        recorded = await self.recorder.record("command", {"payload": body}, dedupe=dedupe)
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
            if await self.recorder.record("command", check.item, dedupe=check.dedupe):
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
            check = await within(RECORD_WAIT, self.answers.check_submission(body))
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
            if not await self.recorder.record("view", item):
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
