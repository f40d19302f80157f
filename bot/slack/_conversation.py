"""Runs in Slack threads: start, continue and resume the agent, and show what it did.

A thread is a conversation. Each run's events become Slack messages: every `InteractionEvent` is
stored as an `InteractionRecord` and posted as a card, and the final output is posted as a reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import blocks
from state import (
    THREAD_LEASE_TTL,
    AuditEntry,
    CorruptRecordError,
    InteractionRecord,
    RunRecord,
    Store,
    StoreError,
    ThreadLease,
    ThreadStop,
    ThreadTake,
)

from .. import Agent, Cancel, InvalidResumeValue, ResumeError, RunAlreadyResumed, _logging
from .._agent import AgentRun
from ..events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent, ToolEvent
from ._chat import Chat, escape
from ._grants import Grants, used_grant
from ._policy import AnswerPolicy, GroupMembers
from ._session import AgentTurn, mention, session_title
from ._worker import derived_run_id, hand_to_done, in_work_item, lease_handed_over

__all__ = ["Conversations", "Thread", "TurnHold"]

log = logging.getLogger("handback.slack")

WORKING_REACTION = "hourglass_flowing_sand"

_UNUSABLE_ANSWER = "the answer given could not be used"

LEASE_RETRY_FIRST = 0.02
"""Seconds before asking again for a thread's lease that another process holds; the wait
doubles up to `LEASE_RETRY_MOST`, so a short turn elsewhere delays this one by little."""

LEASE_RETRY_MOST = 0.2

STOP_POLL = 0.2
"""Seconds between looks at the thread's stop mark while a turn runs (agent sessions only): a
stop pressed at any replica ends the turn within a second."""


@dataclass(kw_only=True)
class TurnHold:
    """A thread's turn taken in this process: its lock held, its lease owner chosen."""

    thread: Thread
    owner: str
    leased: bool = False
    """The store's lease was taken with a claim (`answer_and_claim`): it outlives the turn."""
    take: ThreadTake | None = None
    """The store's last reply to taking the lease for `owner` (with the claim, or
    `take_thread`): whether it is held, and the thread's stop mark read with it."""


@dataclass(kw_only=True)
class _Slot:
    deferred: bool
    """In a work item: where the thread points moves on with the lease's release."""
    run_id: str | None = None
    """The run the thread points at once the turn's lease is released, when deferred."""
    stop: ThreadStop | None = None
    """The thread's stop mark, read with the take that won the lease (with the claim, or
    `take_thread`)."""


@dataclass(kw_only=True, frozen=True)
class Thread:
    """Where a run talks: a channel, the thread's root ts, and who started the conversation."""

    channel: str
    thread_ts: str
    requester: str | None = None


class Conversations:
    """Drives the agent for Slack threads and posts its cards and answers."""

    def __init__(
        self,
        *,
        agent: Agent,
        store: Store,
        chat: Chat,
        ttl: float,
        clock: Callable[[], float] = time.time,
        policy: AnswerPolicy | None = None,
        members: GroupMembers | None = None,
        lease_ttl: float = THREAD_LEASE_TTL,
    ) -> None:
        self.agent = agent
        self.store = store
        self.chat = chat
        self.ttl = ttl
        self.clock = clock
        self.policy = policy
        self.members = members
        self.lease_ttl = lease_ttl
        self.home_changed: Callable[[list[InteractionRecord]], None] | None = None
        """Told (without waiting) which requests were posted or closed, so App Home views that
        list them are refreshed."""
        self.grants = Grants(store=store, chat=chat, policy=policy, members=members, clock=clock)
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def hold_turn(self, thread: Thread) -> TurnHold | None:
        """The thread's turn in this process, taken now, before its lease in the store, or None
        when a turn of the thread runs (or waits) here already. Pass it to `resume()` (which
        lets go of it) or to `let_go()`.

        Taken without waiting, so the lease that `answer_and_claim` takes with the answer (or a
        new turn with its first look at the stop mark, `_open_new_turn`) is always taken after
        the lock, in the order every turn takes them: a turn holding the lock never waits for a
        lease its own process took.
        """
        if _key(thread) in self._locks:
            return None
        return await self._hold(thread)

    def let_go(self, hold: TurnHold) -> None:
        """Give back a turn taken with `hold_turn()` that was not used for a resume."""
        lock, users = self._locks[_key(hold.thread)]
        lock.release()
        if users == 1:
            del self._locks[_key(hold.thread)]
        else:
            self._locks[_key(hold.thread)] = (lock, users - 1)

    async def _hold(self, thread: Thread) -> TurnHold:
        key = _key(thread)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)
            raise
        # A lease this work item kept from an earlier turn in the thread is still its own.
        handed = lease_handed_over(thread.channel, thread.thread_ts)
        return TurnHold(thread=thread, owner=uuid.uuid4().hex if handed is None else handed.owner)

    @asynccontextmanager
    async def _turn(self, thread: Thread, hold: TurnHold | None = None) -> AsyncIterator[_Slot]:
        """One run at a time per thread: a resume and a new message in the same thread do not
        race. A lock orders this process's turns; the store's lease then orders them with other
        processes', so each turn continues from the run the previous one left. `hold` is the
        lock taken already (and maybe the lease, see `hold_turn`)."""
        _logging.bind(channel=thread.channel, thread=thread.thread_ts)
        if hold is None:
            hold = await self._hold(thread)
        try:
            async with self._lease(hold) as slot:
                yield slot
        finally:
            self.let_go(hold)

    @asynccontextmanager
    async def _lease(self, hold: TurnHold) -> AsyncIterator[_Slot]:
        """Hold the thread's lease in the store for the turn, waiting while another process
        holds it (at most `lease_ttl` after that process dies), and refresh it as the turn runs.

        A lease taken with its claim (`hold_turn`, `answer_and_claim`) outlives the turn: the
        work item's `done` releases it and moves the thread on to the turn's run, in one round
        trip (`hand_to_done`), and a later turn of the same item in the thread takes it again as
        the same owner. Any other lease is released here.
        """
        thread, owner = hold.thread, hold.owner
        channel, thread_ts = thread.channel, thread.thread_ts
        handed = lease_handed_over(channel, thread_ts)
        # Only a turn whose lease came with its claim (and a later turn of the same item in that
        # thread) keeps it to the item's end: every other turn points the thread at its run as
        # soon as it is saved, so that a crash before the card is posted still finds it.
        deferred = in_work_item() and (hold.leased or handed is not None)
        wait = LEASE_RETRY_FIRST
        while hold.take is None or not hold.take.held:
            if hold.take is not None:
                log.debug("thread %s/%s is busy in another process; waiting", channel, thread_ts)
                await asyncio.sleep(wait)
                wait = min(wait * 2, LEASE_RETRY_MOST)
            hold.take = await self.store.take_thread(
                channel, thread_ts, owner=owner, ttl=self.lease_ttl
            )
        slot = _Slot(
            deferred=deferred,
            run_id=None if handed is None else handed.run_id,
            stop=hold.take.stop,
        )
        keeper = asyncio.create_task(self._keep_lease(thread, owner))
        try:
            yield slot
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            lease = ThreadLease(
                channel=channel, thread_ts=thread_ts, owner=owner, run_id=slot.run_id
            )
            if not (deferred and hand_to_done(lease)):
                try:
                    await self.store.release_thread(channel, thread_ts, owner=owner)
                except StoreError:
                    # The lease ends by itself within `lease_ttl`; the turn's work is done.
                    log.warning("could not release the lease of thread %s/%s", channel, thread_ts)

    async def _keep_lease(self, thread: Thread, owner: str) -> None:
        """Extend the lease three times per TTL, so a long turn keeps it and a dead one loses it."""
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                kept = await self.store.acquire_thread(
                    thread.channel, thread.thread_ts, owner=owner, ttl=self.lease_ttl
                )
            except StoreError:
                log.warning("could not refresh the lease of thread %s/%s", *_where(thread))
                continue
            if not kept:
                log.warning(
                    "the lease of thread %s/%s expired during a turn; another may overlap it",
                    *_where(thread),
                )

    def _session(self, thread: Thread, *, run_id: str | None) -> AgentTurn | None:
        """The turn's agent session, not begun; None when this process shows classic messages
        (by setting, or since Slack said the app is not an agent)."""
        if not self.chat.agent_view:
            return None
        return AgentTurn(
            chat=self.chat,
            store=self.store,
            channel=thread.channel,
            thread_ts=thread.thread_ts,
            recipient=thread.requester,
            run_id=run_id,
        )

    async def _open_new_turn(
        self, thread: Thread, *, run_id: str | None, title: str
    ) -> tuple[AgentTurn | None, TurnHold | None]:
        """A new message's session, `processing` at once; and the thread's turn, when it was
        free here and this took it with a first take of the lease (pass it to `_turn`).

        The stop mark is read before the session shows `processing` (and with it the stop
        button), so a stop pressed for this turn can never be taken for an older one: with that
        first take, which the turn makes anyway; on its own when another turn of the thread
        runs or waits here (its lock is not waited for before `processing`)."""
        turn = self._session(thread, run_id=run_id)
        if turn is None:
            return None, None
        hold = await self.hold_turn(thread)
        try:
            if hold is None:
                turn.stop_before = await self.store.thread_stop(thread.channel, thread.thread_ts)
            else:
                hold.take = await self.store.take_thread(
                    thread.channel, thread.thread_ts, owner=hold.owner, ttl=self.lease_ttl
                )
                turn.stop_before = hold.take.stop
            if await turn.begin(title=title, initiator=thread.requester):
                return turn, hold
        except BaseException:
            if hold is not None:
                self.let_go(hold)
            raise
        # A refusal turned this process classic; any other failure still streams.
        return (turn if self.chat.agent_view else None), hold

    async def start(
        self,
        thread: Thread,
        *,
        text: str,
        message_ts: str,
        run_id: str | None = None,
        retry: bool = False,
    ) -> None:
        """A person's message: a new run, or the next turn of the thread's conversation.

        `run_id` comes from the work item, so a retry of the same message finds the run its
        first attempt started (and continues or replays it) instead of starting another.
        """
        turn, hold = await self._open_new_turn(thread, run_id=run_id, title=session_title(text))
        if turn is None:
            try:
                await self.chat.react(thread.channel, message_ts, WORKING_REACTION)
            except BaseException:
                if hold is not None:
                    self.let_go(hold)
                raise
        try:
            async with self._turn(thread, hold) as slot:
                if turn is not None and retry:
                    if await self._stopped_before(thread, run_id, turn):
                        return
                    await turn.take_over()
                await self._start(thread, slot, text=text, run_id=run_id, turn=turn)
        finally:
            if turn is None:
                await self.chat.unreact(thread.channel, message_ts, WORKING_REACTION)

    async def _start(
        self,
        thread: Thread,
        slot: _Slot,
        *,
        text: str,
        run_id: str | None,
        turn: AgentTurn | None,
    ) -> None:
        parent_id = slot.run_id or await self.store.get_thread_run(thread.channel, thread.thread_ts)
        if parent_id is not None and parent_id == run_id:
            # A retry after the first attempt saved this very run (and pointed the thread at
            # it): replay it, with the parent it was made from, as the runtime checks.
            saved = await self.store.load_run(run_id)
            parent_id = saved.parent_id if saved is not None else None
        try:
            by = [thread.requester] if thread.requester else []
            run = self.agent(prompt=text, parent_id=parent_id, run_id=run_id, by=by)
            await self._drive_stoppable(run, thread, turn, slot)
        except StoreError:
            raise  # The work item is taken again once the store answers.
        except RunAlreadyResumed:
            await self._say(
                thread,
                turn,
                "I'm still working on the last answer in this thread; send that again in a moment.",
            )
            return
        except Exception:
            await self._failed(thread, "starting a run", turn)
            return
        if parent_id is not None:
            await self.close_pending(parent_id, status="superseded", user=thread.requester)

    async def call_tool(
        self,
        thread: Thread,
        *,
        tool: str,
        arguments: dict[str, Any],
        text: str,
        run_id: str | None = None,
    ) -> None:
        """A person's slash command: the tool runs in `thread` (new), through the approval gate;
        its card or its result is posted there (`Agent.call_tool`)."""
        turn, hold = await self._open_new_turn(thread, run_id=run_id, title=session_title(text))
        async with self._turn(thread, hold) as slot:
            try:
                run = self.agent.call_tool(tool, arguments, text=text, run_id=run_id)
                await self._drive_stoppable(run, thread, turn, slot)
            except StoreError:
                raise
            except Exception:
                await self._failed(thread, f"running the command {text!r}", turn)

    async def resume(
        self,
        *,
        run_id: str,
        answers: dict[str, Any],
        thread: Thread,
        working_ts: str | None = None,
        child_id: str | None = None,
        by: Sequence[str] = (),
        hold: TurnHold | None = None,
        claimed: RunRecord | None = None,
    ) -> None:
        """Resume a paused run with every answer it waits for; a lost race is not an error.

        `child_id` comes from the work item: its retry claims the run again as the same child
        (the store lets the same child win twice) and continues where the first attempt got.
        `by` names who gave the answers: they count as requesters of what the run asks next.
        `hold` is the thread's turn taken with `hold_turn()` (this lets go of it), and `claimed`
        the run as `answer_and_claim` claimed it for `child_id` with the lease of `hold` (and
        the thread's stop mark, in `hold.take`).
        """
        # The session shows `processing` once the run has claimed the paused one (its
        # `StartEvent`), so a resume that loses the claim to another never touches the status the
        # winner shows; the stop mark it starts from is the one read with its lease.
        turn = self._session(thread, run_id=child_id)
        try:
            if turn is None and working_ts:
                await self.chat.react(thread.channel, working_ts, WORKING_REACTION)
            elif turn is not None:
                turn.working_ts = working_ts
        except BaseException:
            if hold is not None:
                self.let_go(hold)
            raise
        try:
            async with self._turn(thread, hold) as slot:
                if turn is not None:
                    turn.stop_before = slot.stop
                if turn is not None and claimed is None and child_id is not None:
                    # Possibly a retry (a claim won just now never is): the stream a dead
                    # attempt of this child left open is stopped and taken away, or, finished,
                    # not shown twice. Keyed by the child's own id, so never another's stream.
                    await turn.take_over()
                run = self.agent(
                    parent_id=run_id, resume=answers, run_id=child_id, by=by, claimed=claimed
                )
                await self._drive_stoppable(run, thread, turn, slot)
        except StoreError:
            raise
        except RunAlreadyResumed as error:
            log.info("run %s was already resumed by %s", run_id, error.resumed_by)
        except InvalidResumeValue as error:
            # Left paused, the run would wait for an answer that is already spent, and be
            # retried (and refused) on every restart: end it instead.
            log.warning("resume of run %s refused, cancelling it: %s", run_id, error)
            cancel = {interaction_id: Cancel(_UNUSABLE_ANSWER) for interaction_id in answers}
            if claimed is not None:
                # Claimed for `child_id`, which saved nothing: that child cancels it instead.
                await self.resume(
                    run_id=run_id, answers=cancel, thread=thread, child_id=child_id, claimed=claimed
                )
                return
            retry = None if child_id is None else f"{child_id}_cancel"
            await self.resume(run_id=run_id, answers=cancel, thread=thread, child_id=retry)
        except ResumeError as error:
            log.warning("resume of run %s refused: %s", run_id, error)
            await self._say(
                thread, turn, "I could not continue with that answer, so this request is closed."
            )
        except Exception:
            await self._failed(thread, f"resuming run {run_id}", turn)
        finally:
            if working_ts and (turn is None or turn.reacted):
                await self.chat.unreact(thread.channel, working_ts, WORKING_REACTION)

    # --------------------------------------------------------------- stopping

    async def _drive_stoppable(
        self, run: AgentRun, thread: Thread, turn: AgentTurn | None, slot: _Slot
    ) -> None:
        """Drive the run; a stop pressed in the thread once the turn began (in any process: the
        mark is in the store) cancels it within `STOP_POLL`, and the turn ends as stopped."""
        if turn is None:
            await self._drive(run, thread, turn, slot)  # Classic messages have no stop button.
            return
        driving = asyncio.create_task(self._drive(run, thread, turn, slot))
        watching = asyncio.create_task(self._watch_stop(thread, turn.stop_before, driving))
        try:
            await driving
        except asyncio.CancelledError:
            me = asyncio.current_task()
            stop = watching.result() if watching.done() and not watching.cancelled() else None
            if stop is None or (me is not None and me.cancelling()):
                raise  # Not our stop: the worker is shutting down and hands the work on.
            await self._stopped(run.run_id, thread, turn, stop)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    async def _watch_stop(
        self, thread: Thread, before: ThreadStop | None, driving: asyncio.Task[None]
    ) -> ThreadStop:
        """Cancel `driving` once the thread's stop mark is not the one it had when the turn
        began (compared by value, not by time: processes' clocks differ)."""
        while True:
            await asyncio.sleep(STOP_POLL)
            try:
                stop = await self.store.thread_stop(thread.channel, thread.thread_ts)
            except StoreError:
                continue  # The run goes on; the next poll may see the stop.
            if stop is not None and stop != before:
                driving.cancel()
                return stop

    async def _stopped(
        self, run_id: str, thread: Thread, turn: AgentTurn, stop: ThreadStop
    ) -> None:
        """The run was cancelled by a stop (and saved `cancelled/interrupted`, its open calls
        closed): the thread continues from it, the session leaves `processing`."""
        log.info("run %s in %s/%s stopped by %s", run_id, *_where(thread), stop.user)
        if await self.store.load_run(run_id) is not None:
            await self.store.set_thread_run(thread.channel, thread.thread_ts, run_id)
        await turn.finish("active")
        await self.chat.post(
            thread.channel, f"Stopped by {mention(stop.user)}.", thread_ts=thread.thread_ts
        )

    async def _stopped_before(self, thread: Thread, run_id: str | None, turn: AgentTurn) -> bool:
        """A retried turn whose run was stopped by a person (not handed on by a worker that
        shut down, which also leaves it `cancelled/interrupted`) is not carried on."""
        if run_id is None:
            return False
        saved = await self.store.load_run(run_id)
        if saved is None or saved.reason != "interrupted":
            return False
        stop = await self.store.thread_stop(thread.channel, thread.thread_ts)
        if stop is None or stop.at * 1000 < saved.t0:
            return False
        await self.store.set_thread_run(thread.channel, thread.thread_ts, run_id)
        await turn.take_over()
        await turn.finish("active")
        return True

    async def stop(self, thread: Thread, *, user: str) -> None:
        """Someone pressed stop in the thread (`agent_session_stopped`): the turn running there
        stops by itself (`_watch_stop`); in the thread's turn order this closes any card still
        open as stopped, ends its run with `Cancel`, and takes the session out of `processing`.
        """
        reason = f"stopped by {mention(user)}"
        closed: list[InteractionRecord] = []
        async with self._turn(thread):
            run_id = await self.store.get_thread_run(thread.channel, thread.thread_ts)
            await self.store.audit(
                AuditEntry(
                    at=self.clock(),
                    action="stopped",
                    run_id=run_id,
                    user=user,
                    detail=f"{thread.channel}/{thread.thread_ts}",
                )
            )
            if run_id is not None:
                closed = await self._close_for_stop(run_id, user=user, reason=reason)
            if not closed:
                await self.chat.set_status(thread.channel, thread.thread_ts, "active")
        if run_id is not None and closed:
            await self.resume(
                run_id=run_id,
                answers={record.interaction_id: Cancel(reason) for record in closed},
                thread=Thread(
                    channel=thread.channel,
                    thread_ts=thread.thread_ts,
                    requester=closed[0].requester,
                ),
                child_id=derived_run_id(run_id, "stop"),
            )

    async def _close_for_stop(
        self, run_id: str, *, user: str, reason: str
    ) -> list[InteractionRecord]:
        closed = []
        for record in await self.store.run_interactions(run_id):
            if record.status != "pending":
                continue
            claim = await self.store.close_interaction(
                record.interaction_id, status="cancelled", now=self.clock()
            )
            if not claim.won or claim.record is None:
                continue
            closed.append(claim.record)
            await self.store.audit(
                AuditEntry(
                    at=self.clock(),
                    action="cancelled",
                    interaction_id=record.interaction_id,
                    run_id=run_id,
                    user=user,
                    detail=reason,
                )
            )
            await self.show_closed(
                claim.record, note=f":octagonal_sign: This request was {reason}."
            )
        return closed

    # ---------------------------------------------------------------- driving

    async def _drive(
        self, run: AgentRun, thread: Thread, turn: AgentTurn | None, slot: _Slot
    ) -> None:
        interactions: list[InteractionEvent] = []
        output: OutputEvent | None = None
        async for event in run:
            if isinstance(event, OutputEvent):
                output = event
            elif isinstance(event, StartEvent):
                if turn is not None and not turn.begun:
                    await self._begin_resumed(thread, turn)
            elif isinstance(event, InteractionEvent):
                interactions.append(event)
                if turn is not None:
                    await turn.waiting(event)
            elif turn is None:
                continue
            elif isinstance(event, DeltaEvent):
                await turn.text(event.text)
            elif isinstance(event, ToolEvent):
                await turn.tool(event)
        if output is None:
            raise RuntimeError("the run ended without an OutputEvent")
        # The run is in the store by now, so the thread may point at it: at once, or in a work
        # item with the release of the lease, when its `done` (under the lease until then).
        if slot.deferred:
            slot.run_id = output.run_id
        else:
            await self.store.set_thread_run(thread.channel, thread.thread_ts, output.run_id)
        if output.status.reason == "input_required":
            if turn is not None:
                await turn.finish("suspended")
            await self._post_cards(output.run_id, interactions, thread, run.requesters)
            return
        reply = _reply_text(output)
        if turn is None:
            await self.chat.post(thread.channel, reply, thread_ts=thread.thread_ts)
        elif output.status.code == "success" and turn.streamed_text:
            await self._finish(thread, turn)
        else:
            await turn.markdown(("\n\n" if turn.shown else "") + reply)
            await self._finish(thread, turn)
        if output.status.code == "error":
            log.error("run %s ended in error: %s", output.run_id, output.error)

    async def _begin_resumed(self, thread: Thread, turn: AgentTurn) -> None:
        """`processing` for a resume whose run has claimed the paused one; when that first
        agent call finds the app is not an agent, the classic reaction instead."""
        if not await turn.begin() and not self.chat.agent_view and turn.working_ts:
            turn.reacted = await self.chat.react(thread.channel, turn.working_ts, WORKING_REACTION)

    async def _finish(self, thread: Thread, turn: AgentTurn) -> None:
        """End the turn's stream `active`; what could not be streamed is posted."""
        if not await turn.finish("active") and turn.shown:
            await self.chat.post(thread.channel, turn.shown, thread_ts=thread.thread_ts)

    async def _say(self, thread: Thread, turn: AgentTurn | None, text: str) -> None:
        """Tell the thread something we wrote, in the turn's stream when there is one."""
        if turn is None:
            await self.chat.post(thread.channel, text, thread_ts=thread.thread_ts)
            return
        await turn.markdown(("\n\n" if turn.shown else "") + text)
        await self._finish(thread, turn)

    async def _post_cards(
        self, run_id: str, events: list[InteractionEvent], thread: Thread, requesters: list[str]
    ) -> None:
        now = self.clock()
        records: list[InteractionRecord] = []
        granted = False
        for event in events:
            existing = await self.store.get_interaction(event.interaction_id)
            if existing is not None and used_grant(existing):
                # A retry of a turn whose first attempt approved this under a grant: no card;
                # the run's resume is queued below (again: the queue drops a repeat).
                granted = True
                continue
            record = InteractionRecord.placed(
                event.interaction,
                run_id=run_id,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                requester=thread.requester,
                requesters=requesters,
                created_at=now,
                expires_at=now + self.ttl,
            )
            if existing is not None and existing.status == "pending":
                # Paused again on the same interaction: its card stays, the record moves on.
                record.message_ts = existing.message_ts
                record.created_at = existing.created_at
                record.expires_at = existing.expires_at
            records.append(record)
        # Stored before the cards exist, so a click can never find an unknown interaction.
        await self.store.add_interactions(records)
        for record in records:
            if record.message_ts:
                continue
            if await self.grants.answer(record) is not None:
                granted = True  # Approved under a standing grant: no card.
                continue
            card = self.card(record)
            ts = await self.chat.post(
                thread.channel, card["text"], thread_ts=thread.thread_ts, blocks=card["blocks"]
            )
            if ts is None:
                log.error("could not post the card of interaction %s", record.interaction_id)
                await self._card_lost(record, thread, card["text"])
                continue
            await self.store.set_message(
                record.interaction_id, channel=thread.channel, message_ts=ts
            )
            await self._note_unapprovable(record, thread)
        if self.home_changed is not None:
            self.home_changed(records)
        if granted:
            await self._resume_granted(run_id)

    async def _resume_granted(self, run_id: str) -> None:
        """Queue the resume of a run whose approvals grants answered, once nothing else of it
        is pending: this turn holds the thread, so the resume runs as a work item after it, as
        the settled-run recovery would queue it (same work id, so the two never both run). A
        crash before this line leaves a settled run, which that recovery finds."""
        if any(r.status == "pending" for r in await self.store.run_interactions(run_id)):
            return  # A card waits too; its answer resumes the run with every answer.
        key = f"recover:{run_id}"
        await self.store.enqueue("recover", {"id": key, "run_id": run_id}, dedupe=key)

    async def _note_unapprovable(self, record: InteractionRecord, thread: Thread) -> None:
        """In a DM nobody but the requester sees the card; say so when they may not approve it,
        instead of leaving a card that can only expire."""
        if (
            record.kind != "approval"
            or not _is_dm(thread.channel)
            or self.policy is None
            or self.members is None
            or thread.requester is None
        ):
            return
        if await self.policy.refusal(record, thread.requester, self.members) is None:
            return
        await self.chat.post(
            thread.channel,
            ":information_source: Someone else has to approve this, and nobody else can see "
            "this conversation. You can Deny it here; to get it approved, mention me in a "
            "channel where an approver can see the request.",
            thread_ts=thread.thread_ts,
        )

    async def _card_lost(self, record: InteractionRecord, thread: Thread, summary: str) -> None:
        """Say in the thread that a request could not be shown, so the run does not wait unseen.

        The interaction stays pending: a free-text question can still be answered by a reply,
        and the next message in the thread supersedes it, as it would a card.
        """
        how = (
            "Reply in this thread to answer it."
            if blocks.accepts_text_reply(record)
            else "Send your message again to get a new card."
        )
        notice = f":warning: I could not show the buttons for this request in Slack. {how}"
        await self.chat.post(thread.channel, f"{notice}\n{summary}", thread_ts=thread.thread_ts)

    async def close_pending(
        self, run_id: str, *, status: Literal["superseded", "cancelled"], user: str | None
    ) -> None:
        """Close the run's still-pending interactions (superseded, cancelled) and their cards."""
        for record in await self.store.run_interactions(run_id):
            if record.status != "pending":
                continue
            claim = await self.store.close_interaction(
                record.interaction_id, status=status, now=self.clock()
            )
            if not claim.won or claim.record is None:
                continue
            await self.store.audit(
                AuditEntry(
                    at=self.clock(),
                    action=status,
                    interaction_id=record.interaction_id,
                    run_id=run_id,
                    user=user,
                )
            )
            await self.show_closed(claim.record)

    def card(self, record: InteractionRecord, *, page: int = 0) -> blocks.Message:
        """The card for `record` as it stands, saying who may approve it (an approval)."""
        return blocks.render(record, page=page, approvers=self.approvers_of(record))

    def approvers_of(self, record: InteractionRecord) -> tuple[str, ...] | None:
        """Who the policy lets approve `record`, for its card; None for a question, without a
        policy, or for a rule that does not read back (the card then names nobody)."""
        if record.kind != "approval" or self.policy is None:
            return None
        try:
            return self.policy.approvers_of(record)
        except CorruptRecordError:
            return None

    async def show_closed(self, record: InteractionRecord, *, note: str | None = None) -> None:
        """Bring the card up to date with the record: answered, expired, superseded, ...
        (an update that repeats one already made changes nothing); `note` replaces the line
        that says how it closed."""
        if record.channel and record.message_ts:
            card = self.card(record)
            if note is not None and card["blocks"]:
                card["blocks"][-1] = {"type": "section", "text": {"type": "mrkdwn", "text": note}}
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )
        if self.home_changed is not None:
            self.home_changed([record])

    async def _failed(self, thread: Thread, doing: str, turn: AgentTurn | None) -> None:
        log.exception("failed while %s in %s/%s", doing, thread.channel, thread.thread_ts)
        await self._say(
            thread,
            turn,
            "Sorry, something went wrong on my side. The details are in the bot's log.",
        )


def _reply_text(output: OutputEvent) -> str:
    status = output.status
    if status.code == "success":
        value = output.output
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        return escape(text) if text.strip() else "Done."
    if status.code == "cancelled":
        why = f" ({_escape_keeping_mentions(status.message)})" if status.message else ""
        return f"Stopped{why}."
    return "Sorry, that did not work out: the run failed. The details are in the bot's log."


_MENTION = re.compile(r"&lt;@([UW][A-Z0-9]{2,30})&gt;")


def _escape_keeping_mentions(text: str) -> str:
    """A cancel reason, escaped, with well-formed user mentions kept as mentions: ours say who
    stopped the run ("stopped by <@U…>"); nothing but a user id survives (no `<!channel>`, no
    link), and a reason is never the model's text."""
    return _MENTION.sub(r"<@\1>", escape(text))


def _key(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts


def _where(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts


def _is_dm(channel: str) -> bool:
    # Slack's direct-message conversation ids start with D; channels with C, private ones G.
    return channel.startswith("D")
