"""Runs in Slack threads: start, continue and resume the agent, and show what it did.

A thread is a conversation. Each run's events become Slack messages: every `InteractionEvent` is
stored as an `InteractionRecord` and posted as a card, and the final output is posted as a reply.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import blocks
from state import (
    THREAD_LEASE_TTL,
    AuditEntry,
    InteractionRecord,
    RunRecord,
    Store,
    StoreError,
    ThreadLease,
)

from .. import Agent, Cancel, InvalidResumeValue, ResumeError, RunAlreadyResumed
from .._agent import AgentRun
from ..events import InteractionEvent, OutputEvent
from ._chat import Chat, escape
from ._policy import AnswerPolicy, GroupMembers
from ._worker import hand_to_done, in_work_item, lease_handed_over

__all__ = ["Conversations", "Thread", "TurnHold"]

log = logging.getLogger("handback.slack")

WORKING_REACTION = "hourglass_flowing_sand"

_UNUSABLE_ANSWER = "the answer given could not be used"

LEASE_RETRY_FIRST = 0.02
"""Seconds before asking again for a thread's lease that another process holds; the wait
doubles up to `LEASE_RETRY_MOST`, so a short turn elsewhere delays this one by little."""

LEASE_RETRY_MOST = 0.2


@dataclass(kw_only=True)
class TurnHold:
    """A thread's turn taken in this process: its lock held, its lease owner chosen."""

    thread: Thread
    owner: str
    leased: bool = False
    """The store's lease is held by `owner` already (taken with a claim)."""


@dataclass(kw_only=True)
class _Turn:
    deferred: bool
    """In a work item: where the thread points moves on with the lease's release."""
    run_id: str | None = None
    """The run the thread points at once the turn's lease is released, when deferred."""


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
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def hold_turn(self, thread: Thread) -> TurnHold | None:
        """The thread's turn in this process, taken now, before its lease in the store, or None
        when a turn of the thread runs (or waits) here already. Pass it to `resume()` (which
        lets go of it) or to `let_go()`.

        Taken without waiting, so the lease that `answer_and_claim` takes with the answer is
        always taken after the lock, in the order every turn takes them: a turn holding the lock
        never waits for a lease its own process took.
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
    async def _turn(self, thread: Thread, hold: TurnHold | None = None) -> AsyncIterator[_Turn]:
        """One run at a time per thread: a resume and a new message in the same thread do not
        race. A lock orders this process's turns; the store's lease then orders them with other
        processes', so each turn continues from the run the previous one left. `hold` is the
        lock taken already (and maybe the lease, see `hold_turn`)."""
        if hold is None:
            hold = await self._hold(thread)
        try:
            async with self._lease(hold) as turn:
                yield turn
        finally:
            self.let_go(hold)

    @asynccontextmanager
    async def _lease(self, hold: TurnHold) -> AsyncIterator[_Turn]:
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
        while not hold.leased and not await self.store.acquire_thread(
            channel, thread_ts, owner=owner, ttl=self.lease_ttl
        ):
            log.debug("thread %s/%s is busy in another process; waiting", channel, thread_ts)
            await asyncio.sleep(wait)
            wait = min(wait * 2, LEASE_RETRY_MOST)
        hold.leased = True
        turn = _Turn(deferred=deferred, run_id=None if handed is None else handed.run_id)
        keeper = asyncio.create_task(self._keep_lease(thread, owner))
        try:
            yield turn
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
            lease = ThreadLease(
                channel=channel, thread_ts=thread_ts, owner=owner, run_id=turn.run_id
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

    async def start(
        self, thread: Thread, *, text: str, message_ts: str, run_id: str | None = None
    ) -> None:
        """A person's message: a new run, or the next turn of the thread's conversation.

        `run_id` comes from the work item, so a retry of the same message finds the run its
        first attempt started (and continues or replays it) instead of starting another.
        """
        await self.chat.react(thread.channel, message_ts, WORKING_REACTION)
        try:
            async with self._turn(thread) as turn:
                await self._start(thread, turn, text=text, run_id=run_id)
        finally:
            await self.chat.unreact(thread.channel, message_ts, WORKING_REACTION)

    async def _start(self, thread: Thread, turn: _Turn, *, text: str, run_id: str | None) -> None:
        parent_id = turn.run_id or await self.store.get_thread_run(thread.channel, thread.thread_ts)
        if parent_id is not None and parent_id == run_id:
            # A retry after the first attempt saved this very run: replay it, not its parent.
            parent_id = None
        try:
            run = self.agent(prompt=text, parent_id=parent_id, run_id=run_id)
            await self._drive(run, thread, turn)
        except StoreError:
            raise  # The work item is taken again once the store answers.
        except RunAlreadyResumed:
            await self.chat.post(
                thread.channel,
                "I'm still working on the last answer in this thread; send that again in a moment.",
                thread_ts=thread.thread_ts,
            )
            return
        except Exception:
            await self._failed(thread, "starting a run")
            return
        if parent_id is not None:
            await self.close_pending(parent_id, status="superseded", user=thread.requester)

    async def resume(
        self,
        *,
        run_id: str,
        answers: dict[str, Any],
        thread: Thread,
        working_ts: str | None = None,
        child_id: str | None = None,
        hold: TurnHold | None = None,
        claimed: RunRecord | None = None,
    ) -> None:
        """Resume a paused run with every answer it waits for; a lost race is not an error.

        `child_id` comes from the work item: its retry claims the run again as the same child
        (the store lets the same child win twice) and continues where the first attempt got.
        `hold` is the thread's turn taken with `hold_turn()` (this lets go of it), and `claimed`
        the run as `answer_and_claim` claimed it for `child_id` with the lease of `hold`.
        """
        try:
            if working_ts:
                await self.chat.react(thread.channel, working_ts, WORKING_REACTION)
        except BaseException:
            if hold is not None:
                self.let_go(hold)
            raise
        try:
            async with self._turn(thread, hold) as turn:
                run = self.agent(parent_id=run_id, resume=answers, run_id=child_id, claimed=claimed)
                await self._drive(run, thread, turn)
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
            await self.chat.post(
                thread.channel,
                "I could not continue with that answer, so this request is closed.",
                thread_ts=thread.thread_ts,
            )
        except Exception:
            await self._failed(thread, f"resuming run {run_id}")
        finally:
            if working_ts:
                await self.chat.unreact(thread.channel, working_ts, WORKING_REACTION)

    async def _drive(self, run: AgentRun, thread: Thread, turn: _Turn) -> None:
        interactions: list[InteractionEvent] = []
        output: OutputEvent | None = None
        async for event in run:
            if isinstance(event, InteractionEvent):
                interactions.append(event)
            elif isinstance(event, OutputEvent):
                output = event
        if output is None:
            raise RuntimeError("the run ended without an OutputEvent")
        # The run is in the store by now, so the thread may point at it: at once, or in a work
        # item with the release of the lease, when its `done` (under the lease until then).
        if turn.deferred:
            turn.run_id = output.run_id
        else:
            await self.store.set_thread_run(thread.channel, thread.thread_ts, output.run_id)
        if output.status.reason == "input_required":
            await self._post_cards(output.run_id, interactions, thread)
            return
        await self.chat.post(thread.channel, _reply_text(output), thread_ts=thread.thread_ts)
        if output.status.code == "error":
            log.error("run %s ended in error: %s", output.run_id, output.error)

    async def _post_cards(
        self, run_id: str, events: list[InteractionEvent], thread: Thread
    ) -> None:
        now = self.clock()
        records: list[InteractionRecord] = []
        for event in events:
            existing = await self.store.get_interaction(event.interaction_id)
            record = InteractionRecord(
                interaction_id=event.interaction_id,
                run_id=run_id,
                kind=event.kind,
                payload=event.payload,
                response_schema=event.response_schema,
                tool_call_id=event.tool_call_id,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                requester=thread.requester,
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
            card = blocks.render_card(record)
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

    async def show_closed(self, record: InteractionRecord) -> None:
        """Bring the card up to date with the record: answered, expired, superseded, ...
        (an update that repeats one already made changes nothing)."""
        if record.channel and record.message_ts:
            card = blocks.render(record)
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )

    async def _failed(self, thread: Thread, doing: str) -> None:
        log.exception("failed while %s in %s/%s", doing, thread.channel, thread.thread_ts)
        await self.chat.post(
            thread.channel,
            "Sorry, something went wrong on my side. The details are in the bot's log.",
            thread_ts=thread.thread_ts,
        )


def _reply_text(output: OutputEvent) -> str:
    status = output.status
    if status.code == "success":
        value = output.output
        text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        return escape(text) if text.strip() else "Done."
    if status.code == "cancelled":
        why = f" ({escape(status.message)})" if status.message else ""
        return f"Stopped{why}."
    return "Sorry, that did not work out: the run failed. The details are in the bot's log."


def _key(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts


def _where(thread: Thread) -> tuple[str, str]:
    return thread.channel, thread.thread_ts


def _is_dm(channel: str) -> bool:
    # Slack's direct-message conversation ids start with D; channels with C, private ones G.
    return channel.startswith("D")
