"""A run's events shown in its thread: streamed into the turn's agent session (or, classic,
a reply at the end), its requests handed to `Cards`, the thread pointed at the run once it is
saved; and, in an agent session, the stop button watched while the run goes on."""

from __future__ import annotations

import asyncio
import json
import logging
import re

from state import StoreError

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import ThreadRuns

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import ThreadStop

from .._journal import INTERRUPTED_BY_CRASH
from .._run import AgentRun
from ..events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent, ToolEvent
from ..mcp._live import live_questions
from ._cards import Cards
from ._chat import Chat, escape
from ._live import ThreadQuestions, end_after_restart
from ._session import AgentTurn, mention
from ._stops import stop_child_id
from ._turns import Slot, Thread

__all__ = ["STOP_POLL", "WORKING_REACTION", "Driver"]

log = logging.getLogger("handback.slack")

WORKING_REACTION = "hourglass_flowing_sand"

STOP_POLL = 0.2
"""Seconds between looks at the thread's stop mark while a turn runs (agent sessions only): a
stop pressed at any replica ends the turn within a second."""


class Driver:
    """Drives a run of a thread's turn and shows what it does in the thread."""

    def __init__(self, *, store: ThreadRuns, chat: Chat, cards: Cards) -> None:
        self.store = store
        self.chat = chat
        self.cards = cards

    async def drive(
        self, run: AgentRun, thread: Thread, turn: AgentTurn | None, slot: Slot
    ) -> None:
        """Drive the run; a stop pressed in the thread once the turn began (in any process: the
        mark is in the store) cancels it within `STOP_POLL`, and the turn ends as stopped.

        Nothing here trusts one `cancel()` to reach a task inside a store call (on Python 3.11
        such a cancellation can be lost): the stop watcher ends by itself once the turn has
        ended, and the stop cancels the run until it is stopping. (A turn that swallowed the
        cancellation of this task and went on to its end is done: it is not raised again, the
        work would be retried and its answer posted twice.)
        """
        if turn is None:
            await self._drive(run, thread, turn, slot)  # Classic messages have no stop button.
            return
        driving = asyncio.create_task(self._drive(run, thread, turn, slot))
        watching = asyncio.create_task(
            self._watch_stop(thread, turn.stop_before, run, driving), name="handback-stop-watch"
        )
        me = asyncio.current_task()
        try:
            await driving
        except asyncio.CancelledError:
            if me is not None and me.cancelling():
                raise  # Not our stop: the worker is shutting down and hands the work on.
            stop = await watching  # The watcher cancelled the turn, and ends with it.
            if stop is None:
                raise
            await self._stopped(run, thread, turn, stop)
        finally:
            # The watcher ends with the turn (within one store call), cancelled or not.
            await asyncio.wait([watching])

    async def _watch_stop(
        self,
        thread: Thread,
        before: ThreadStop | None,
        run: AgentRun,
        driving: asyncio.Task[None],
    ) -> ThreadStop | None:
        """Cancel `driving` once the thread's stop mark is not the one it had when the turn
        began (compared by value, not by time: processes' clocks differ), and again until the
        run is stopping or the turn is over; None when the turn ended without a stop.

        Every wait here ends when the turn does, so the watcher never outlives its turn by
        more than the store call it is in: nobody has to cancel it.
        """
        while not driving.done():
            await asyncio.wait([driving], timeout=STOP_POLL)
            if driving.done():
                break
            try:
                stop = await self.store.thread_stop(thread.channel, thread.thread_ts)
            except StoreError:
                continue  # The run goes on; the next poll may see the stop.
            if stop is not None and stop != before:
                await _cancel_until_stopping(run, driving)
                return stop
        return None

    async def _stopped(
        self, run: AgentRun, thread: Thread, turn: AgentTurn, stop: ThreadStop
    ) -> None:
        """The run was cancelled by a stop (and saved `cancelled/interrupted`, its open calls
        closed): the thread continues from it, the session leaves `processing`, and the thread
        and each approved call's card say whether its tool ran, was stopped before it ran, or
        was interrupted while it ran."""
        run_id = run.run_id
        log.info("run %s in %s/%s stopped by %s", run_id, *_where(thread), stop.user)
        saved = await self.store.load_run(run_id)
        if saved is not None:
            if saved.status == "paused":
                # It paused before the stop reached it (a grant may have answered it already):
                # claimed for the stop's `Cancel`, so no grant or recovery resumes it now.
                await self.store.claim_run(run_id, child_id=stop_child_id(run_id))
            await self.store.set_thread_run(thread.channel, thread.thread_ts, run_id)
        await turn.finish("active")
        said = [f"{inline(call.name)} {_OUTCOMES[call.outcome]}" for call in run.stopped_calls]
        await self.chat.post(
            thread.channel,
            f"Stopped by {mention(stop.user)}" + (": " + "; ".join(said) if said else "") + ".",
            thread_ts=thread.thread_ts,
        )
        if run.parent_id is not None and run.stopped_calls:
            await self.cards.note_stopped(run.parent_id, run.stopped_calls, stop.user)

    async def _drive(
        self, run: AgentRun, thread: Thread, turn: AgentTurn | None, slot: Slot
    ) -> None:
        # The questions an MCP server asks during a call of this run are cards in this thread.
        questions = ThreadQuestions(
            store=self.store,
            chat=self.chat,
            cards=self.cards,
            thread=thread,
            requesters=lambda: run.requesters,
        )
        asking = live_questions.set(questions)
        try:
            output, interactions = await self._events(run, thread, turn)
        finally:
            live_questions.reset(asking)
        await self._settled(run, thread, turn, slot, output, interactions)

    async def _events(
        self, run: AgentRun, thread: Thread, turn: AgentTurn | None
    ) -> tuple[OutputEvent | None, list[InteractionEvent]]:
        interactions: list[InteractionEvent] = []
        output: OutputEvent | None = None
        async for event in run:
            if isinstance(event, ToolEvent) and event.result == INTERRUPTED_BY_CRASH:
                # A question asked during that call ended with the process that held it.
                await end_after_restart(self.store, self.cards, run.run_id, event.tool_call_id)
            if isinstance(event, OutputEvent):
                output = event
            elif isinstance(event, StartEvent):
                if turn is not None and not turn.begun:
                    await self._begin_resumed(thread, turn)
            elif isinstance(event, InteractionEvent):
                interactions.append(event)
            elif turn is None:
                continue
            elif isinstance(event, DeltaEvent):
                await turn.text(event.text)
            elif isinstance(event, ToolEvent):
                await turn.tool(event)
        return output, interactions

    async def _settled(
        self,
        run: AgentRun,
        thread: Thread,
        turn: AgentTurn | None,
        slot: Slot,
        output: OutputEvent | None,
        interactions: list[InteractionEvent],
    ) -> None:
        if output is None:
            raise RuntimeError("the run ended without an OutputEvent")
        # The run is in the store by now, so the thread may point at it: before its cards are
        # posted when it paused (a crash in between still finds it), else once the turn lets go
        # of the thread (`ThreadTurns`, in the same round trip as the release of its lease).
        if output.status.reason == "input_required":
            await self.store.set_thread_run(thread.channel, thread.thread_ts, output.run_id)
        else:
            slot.run_id = output.run_id
        if output.status.reason == "input_required":
            # The cards first, so that the stream's last word on each paused call is what
            # happened to it (asked on its card, or approved under a standing grant), never a
            # "waiting" task that would outlive the answer (a stopped stream stays as it is).
            granted = await self.cards.post(
                output.run_id,
                interactions,
                thread,
                run.requesters,
                replayed=run.replayed_since is not None,
            )
            if turn is not None and not await turn.withdraw("suspended"):
                for event in interactions:
                    await turn.asked(event, granted=event.interaction_id in granted)
                await turn.finish("suspended")
            return
        reply = _reply_text(output)
        since = run.replayed_since
        if since is not None and await self.chat.already_posted(
            thread.channel, thread.thread_ts, reply, since=since
        ):
            # The attempt that ended this run posted its answer and died before its work item
            # was done: the retry finishes the work without a second answer.
            if turn is not None:
                await turn.finish("active")
            return
        if turn is None:
            await self.chat.post(thread.channel, reply, thread_ts=thread.thread_ts)
        elif output.status.code == "success" and turn.streamed_text:
            await self._finish(thread, turn)
        else:
            await turn.markdown(("\n\n" if turn.shown else "") + reply)
            await self._finish(thread, turn)
        if output.status.code == "error" and output.status.reason != "model":
            # A failed model call was logged by the runtime in the line the thread shows.
            log.error("run %s ended in error: %s", output.run_id, output.error)

    async def _begin_resumed(self, thread: Thread, turn: AgentTurn) -> None:
        """`processing` for a resume whose run has claimed the paused one; when that first
        agent call finds the app is not an agent, the classic reaction instead."""
        if not await turn.begin() and not self.chat.agent_surface.enabled and turn.working_ts:
            turn.reacted = await self.chat.react(thread.channel, turn.working_ts, WORKING_REACTION)

    async def _finish(self, thread: Thread, turn: AgentTurn) -> None:
        """End the turn's stream `active`; what could not be streamed is posted."""
        if not await turn.finish("active") and turn.shown:
            await self.chat.post(thread.channel, turn.shown, thread_ts=thread.thread_ts)

    async def say(self, thread: Thread, turn: AgentTurn | None, text: str) -> None:
        """Tell the thread something we wrote, in the turn's stream when there is one."""
        if turn is None:
            await self.chat.post(thread.channel, text, thread_ts=thread.thread_ts)
            return
        await turn.markdown(("\n\n" if turn.shown else "") + text)
        await self._finish(thread, turn)

    async def failed(self, thread: Thread, doing: str, turn: AgentTurn | None) -> None:
        log.exception("failed while %s in %s/%s", doing, thread.channel, thread.thread_ts)
        await self.say(
            thread,
            turn,
            "Sorry, something went wrong on my side. The details are in the bot's log.",
        )


async def _cancel_until_stopping(run: AgentRun, driving: asyncio.Task[None]) -> None:
    """Cancel the turn, again every `STOP_POLL` while the run is still not stopping (the
    cancellation was lost inside a store call), until the turn is over."""
    driving.cancel()
    while not driving.done():
        await asyncio.wait([driving], timeout=STOP_POLL)
        if not driving.done() and run.stoppable:
            driving.cancel()


_OUTCOMES = {
    "ran": "ran (its result is kept)",
    "interrupted": "was interrupted while it ran: it may or may not have taken effect",
    "not_started": "was stopped before it ran: it did not run",
}


def inline(name: str) -> str:
    """A tool name as inline code (escaped: an MCP server names its own tools)."""
    return f"`{escape(name.replace('`', ''))}`"


def _reply_text(output: OutputEvent) -> str:
    status = output.status
    if status.code == "success":
        value = output.output
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        return escape(text) if text.strip() else "Done."
    if status.code == "cancelled":
        why = f" ({_escape_keeping_mentions(status.message)})" if status.message else ""
        return f"Stopped{why}."
    if status.reason == "model" and status.message:
        # Our one line (the SDK's kind, the HTTP status, the server's words, masked): the
        # person sees why, and what to fix is then the operator's to read in the same words.
        return f"Sorry, that did not work out: {escape(status.message.rstrip('.'))}."
    return "Sorry, that did not work out: the run failed. The details are in the bot's log."


_MENTION = re.compile(r"&lt;@([UW][A-Z0-9]{2,30})&gt;")


def _escape_keeping_mentions(text: str) -> str:
    """A cancel reason, escaped, with well-formed user mentions kept as mentions: ours say who
    stopped the run ("stopped by <@U…>"); nothing but a user id survives (no `<!channel>`, no
    link), and a reason is never the model's text."""
    return _MENTION.sub(r"<@\1>", escape(text))


def _where(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts
