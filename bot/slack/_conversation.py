"""Runs in Slack threads: start, continue and resume the agent, and stop it.

A thread is a conversation: each person's message, command, answer or stop press becomes a turn of
it (`ThreadTurns`), run by the agent and shown in the thread by `Driver`, its requests posted as
cards by `Cards`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from state import AuditEntry, InteractionRecord, RunRecord, StoreError, stop_mark

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import ThreadWork

from .. import Agent, Cancel, InvalidResumeValue, ResumeError, RunAlreadyResumed, RunStopped
from ._cards import Cards
from ._chat import Chat
from ._drive import WORKING_REACTION, Driver
from ._grants import Grants
from ._liveness import Liveness
from ._policy import AnswerPolicy, GroupMembers
from ._session import AgentTurn, mention, session_title
from ._stops import stop_child_id
from ._turns import Slot, Thread, ThreadTurns, TurnHold

__all__ = ["Conversations"]

log = logging.getLogger("handback.slack")

_UNUSABLE_ANSWER = "the answer given could not be used"


class Conversations:
    """Drives the agent for Slack threads and posts its cards and answers."""

    def __init__(
        self,
        *,
        agent: Agent,
        store: ThreadWork,
        chat: Chat,
        ttl: float,
        clock: Callable[[], float] = time.time,
        policy: AnswerPolicy | None = None,
        members: GroupMembers | None = None,
        liveness: Liveness,
    ) -> None:
        self.agent = agent
        self.store = store
        self.chat = chat
        self.ttl = ttl
        self.clock = clock
        self.policy = policy
        self.members = members
        self.grants = Grants(store=store, chat=chat, policy=policy, members=members, clock=clock)
        self.turns = ThreadTurns(store=store, liveness=liveness)
        self.cards = Cards(
            store=store,
            chat=chat,
            ttl=ttl,
            grants=self.grants,
            clock=clock,
            policy=policy,
            members=members,
        )
        self.driver = Driver(store=store, chat=chat, cards=self.cards)

    def _session(self, thread: Thread, *, run_id: str | None) -> AgentTurn | None:
        """The turn's agent session, not begun; None when this process shows classic messages
        (by setting, or since Slack said the app is not an agent)."""
        if not self.chat.agent_surface.enabled:
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
        free here and this took it with a first take of the lease (pass it to `ThreadTurns.turn`).

        The stop mark is read before the session shows `processing` (and with it the stop
        button), so a stop pressed for this turn can never be taken for an older one: with that
        first take, which the turn makes anyway; on its own when another turn of the thread
        runs or waits here (its lock is not waited for before `processing`)."""
        turn = self._session(thread, run_id=run_id)
        if turn is None:
            return None, None
        hold = await self.turns.hold_turn(thread)
        try:
            if hold is None:
                turn.stop_before = await self.store.thread_stop(thread.channel, thread.thread_ts)
            else:
                take = await self.store.take_thread(
                    thread.channel,
                    thread.thread_ts,
                    owner=hold.owner,
                    ttl=self.turns.lease_ttl,
                    initiator=thread.requester,
                )
                self.turns.leased(hold, take)
                turn.stop_before = take.stop
            if await turn.begin(title=title, initiator=thread.requester):
                return turn, hold
        except BaseException:
            if hold is not None:
                self.turns.let_go(hold)
            raise
        # A refusal turned this process classic; any other failure still streams.
        return (turn if self.chat.agent_surface.enabled else None), hold

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
                    self.turns.let_go(hold)
                raise
        try:
            async with self.turns.turn(thread, hold) as slot:
                if turn is not None and retry:
                    if await self._stopped_before(thread, run_id, turn):
                        return
                    await turn.take_over()
                await self._start(thread, slot, text=text, run_id=run_id, turn=turn, retry=retry)
        finally:
            if turn is None:
                await self.chat.unreact(thread.channel, message_ts, WORKING_REACTION)

    async def _start(
        self,
        thread: Thread,
        slot: Slot,
        *,
        text: str,
        run_id: str | None,
        turn: AgentTurn | None,
        retry: bool = False,
    ) -> None:
        parent_id = await self.store.get_thread_run(thread.channel, thread.thread_ts)
        if retry and run_id is not None and parent_id is not None and parent_id != run_id:
            saved = await self.store.load_run(run_id)
            if saved is not None and saved.resumed_by is not None:
                # The first attempt's run paused and died before its work was done; its card
                # was answered since and the run resumed (the thread moved on with it): this
                # retry has nothing left to do, and must not start the run again.
                return
        if parent_id is not None and parent_id == run_id:
            # A retry after the first attempt saved this very run (and pointed the thread at
            # it): replay it, with the parent it was made from, as the runtime checks.
            saved = await self.store.load_run(run_id)
            parent_id = saved.parent_id if saved is not None else None
        try:
            by = [thread.requester] if thread.requester else []
            run = self.agent(
                prompt=text,
                parent_id=parent_id,
                run_id=run_id,
                by=by,
                channel=thread.channel,
                **_turn_of(thread, turn),
            )
            await self.driver.drive(run, thread, turn, slot)
        except StoreError:
            raise  # The work item is taken again once the store answers.
        except RunStopped as error:
            log.info("run %s stopped in the store before its tools started", error.run_id)
            await self._stopped_in_store(thread, error)
            return
        except RunAlreadyResumed:
            await self.driver.say(
                thread,
                turn,
                "I'm still working on the last answer in this thread; send that again in a moment.",
            )
            return
        except Exception:
            await self.driver.failed(thread, "starting a run", turn)
            return
        if parent_id is not None:
            await self.cards.close_pending(parent_id, status="superseded", user=thread.requester)

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
        async with self.turns.turn(thread, hold) as slot:
            try:
                run = self.agent.call_tool(
                    tool,
                    arguments,
                    text=text,
                    run_id=run_id,
                    channel=thread.channel,
                    **_turn_of(thread, turn),
                )
                await self.driver.drive(run, thread, turn, slot)
            except StoreError:
                raise
            except RunStopped as error:
                log.info("command run %s stopped before its tool started", error.run_id)
                await self._stopped_in_store(thread, error)
            except Exception:
                await self.driver.failed(thread, f"running the command {text!r}", turn)

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
        `hold` is the thread's turn taken with `ThreadTurns.hold_turn()` (this lets go of it),
        and `claimed` the run as `answer_and_claim` claimed it for `child_id` with the lease of
        `hold` (and the thread's stop mark, in `hold.take`).
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
                self.turns.let_go(hold)
            raise
        try:
            async with self.turns.turn(thread, hold) as slot:
                if turn is not None:
                    turn.stop_before = slot.stop
                if turn is not None and claimed is None and child_id is not None:
                    # Possibly a retry (a claim won just now never is): the stream a dead
                    # attempt of this child left open is stopped and taken away, or, finished,
                    # not shown twice. Keyed by the child's own id, so never another's stream.
                    await turn.take_over()
                run = self.agent(
                    parent_id=run_id,
                    resume=answers,
                    run_id=child_id,
                    by=by,
                    claimed=claimed,
                    channel=thread.channel,
                )
                await self.driver.drive(run, thread, turn, slot)
        except StoreError:
            raise
        except RunAlreadyResumed as error:
            log.info("run %s was already resumed by %s", run_id, error.resumed_by)
        except RunStopped as error:
            # The store refused the claim: the turn was stopped, and its stop (in the thread's
            # turn order) closes its requests and tells the thread. Nothing to say here.
            who = error.stop.user if error.stop is not None else "someone"
            log.info("run %s not resumed: its turn was stopped by %s", run_id, who)
            await self._stopped_in_store(thread, error)
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
            await self.driver.say(
                thread, turn, "I could not continue with that answer, so this request is closed."
            )
        except Exception:
            await self.driver.failed(thread, f"resuming run {run_id}", turn)
        finally:
            if working_ts and (turn is None or turn.reacted):
                await self.chat.unreact(thread.channel, working_ts, WORKING_REACTION)

    # --------------------------------------------------------------- stopping

    async def _stopped_in_store(self, thread: Thread, error: RunStopped) -> None:
        """A run the store stopped before its tools started was saved stopped: the thread goes
        on from it (the next message continues after it, as after any stop). A refused claim
        (`error.stop` set) saved nothing, and the thread stays where it was."""
        if error.stop is None:
            await self.store.set_thread_run(thread.channel, thread.thread_ts, error.run_id)

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

    async def stop(self, thread: Thread, *, user: str, claimed: str | None = None) -> None:
        """Someone allowed to pressed stop in the thread (`agent_session_stopped`): the turn
        running there stops by itself (`Driver.drive`); in the thread's turn order this closes
        any card still open as stopped, ends its run with `Cancel`, and takes the session out
        of `processing`. `claimed` is the paused run the stop claimed when it arrived
        (`StopCheck`): every request of it ends, answered ones too (nothing resumes them now).
        """
        reason = f"stopped by {mention(user)}"
        closed: list[InteractionRecord] = []
        ending: list[InteractionRecord] = []
        async with self.turns.turn(thread):
            run_id = claimed or await self.store.get_thread_run(thread.channel, thread.thread_ts)
            if claimed is None and run_id is not None:
                # The stopped turn's own run, claimed for the stop when it was cancelled paused.
                saved = await self.store.load_run(run_id)
                if saved is not None and saved.resumed_by == stop_child_id(run_id):
                    claimed = run_id
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
                closed = await self.cards.close_for_stop(
                    run_id, user=user, reason=reason, answered_too=claimed is not None
                )
            # A run the stop claimed is ended whatever its requests say (all answered, expired):
            # left claimed and paused, the thread could not go on from it.
            ending = closed
            if claimed is not None:
                ending = await self.store.run_interactions(claimed)
            elif run_id is not None and ending:
                # The run paused after the stop arrived (nothing to claim then): the stop's
                # Cancel claims it now, unguarded, as the one resume a stopped turn allows.
                await self.store.claim_run(run_id, child_id=stop_child_id(run_id))
            if not ending:
                await self.chat.agent_surface.set_status(thread.channel, thread.thread_ts, "active")
        if run_id is not None and ending:
            await self.resume(
                run_id=run_id,
                answers={record.interaction_id: Cancel(reason) for record in ending},
                thread=Thread(
                    channel=thread.channel,
                    thread_ts=thread.thread_ts,
                    requester=ending[0].requester,
                ),
                child_id=stop_child_id(run_id),
            )


def _turn_of(thread: Thread, turn: AgentTurn | None) -> dict[str, Any]:
    """A new turn's place and the stop mark it began under (read before `processing` showed the
    stop button), for the store's stop checks. A classic turn has no stop button: unchecked."""
    if turn is None:
        return {}
    return {"thread": (thread.channel, thread.thread_ts), "stop_seen": stop_mark(turn.stop_before)}
