"""Answers given by talking in the thread: a reply answers the thread's open free-text
question, and a message someone may not answer with is held back (it would close the thread's
open requests)."""

from __future__ import annotations

import time
from collections.abc import Callable

import blocks
from blocks import InvalidAnswer

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import ReplyStore

from ._claim import Claims
from ._earlier import own_earlier_answer
from ._policy import AnswerPolicy, GroupMembers
from ._refusal import Refusal
from ._refuse import Refuser
from ._take import Take
from ._turns import Thread
from ._worker import Work

__all__ = ["Replies"]


class Replies:
    """Takes thread replies as answers, and holds back messages that may not close a request."""

    def __init__(
        self,
        *,
        store: ReplyStore,
        policy: AnswerPolicy,
        members: GroupMembers,
        take: Take,
        claims: Claims,
        refuser: Refuser,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.policy = policy
        self.members = members
        self.take = take
        self.claims = claims
        self.refuser = refuser
        self.clock = clock

    async def on_thread_reply(
        self, thread: Thread, *, user: str, text: str, work: Work | None = None
    ) -> bool:
        """Answer the thread's pending free-text question with a reply; False if there is none."""
        run_id = await self.store.get_thread_run(thread.channel, thread.thread_ts)
        if run_id is None:
            return False
        open_questions = [
            record
            for record in await self.store.run_interactions(run_id)
            if record.status == "pending" and blocks.accepts_text_reply(record)
        ]
        if not open_questions:
            return (
                work is not None
                and work.retry
                and await self._retry_reply(run_id, user=user, text=text, work=work)
            )
        record = open_questions[0]
        try:
            record = await self.take.pending(record.interaction_id, user, channel=thread.channel)
            answer = blocks.answer_from_text(record, text)
        except (Refusal, InvalidAnswer) as error:
            await self.refuser.refuse(
                user=user,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                reason=str(error),
                interaction_id=record.interaction_id,
                run_id=run_id,
            )
            return True
        await self.claims.accept(record, user=user, answer=answer, work=work)
        return True

    async def _retry_reply(self, run_id: str, *, user: str, text: str, work: Work) -> bool:
        """A retried reply whose first attempt claimed the question (and may have resumed the
        run, so the thread already points at its child): finish that work; False when the
        reply answered nothing and is a message like any other."""
        run = await self.store.load_run(run_id)
        for candidate in (run_id, run.parent_id if run else None):
            if candidate is None:
                continue
            for record in await self.store.run_interactions(candidate):
                if blocks.accepts_text_reply(record) and own_earlier_answer(record, user, work):
                    answer = blocks.answer_from_text(record, text)
                    await self.claims.accept(record, user=user, answer=answer, work=work)
                    return True
        return False

    async def holds_thread(self, thread: Thread, *, user: str) -> bool:
        """True, and the person is told why, when their message may not move the thread on.

        A new message closes the cards the thread's run still waits for (`superseded`), so it
        is an answer of sorts: someone the policy would refuse on the card (a non-approver, for
        instance) must not be able to close it by talking in the thread. The requester may
        always withdraw their own request.
        """
        run_id = await self.store.get_thread_run(thread.channel, thread.thread_ts)
        if run_id is None:
            return False
        now = self.clock()
        for record in await self.store.run_interactions(run_id):
            if record.status != "pending" or record.expires_at <= now or record.requester == user:
                continue
            refusal = await self.policy.refusal(record, user, self.members, denying=True)
            if refusal is None:
                continue
            await self.refuser.refuse(
                user=user,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                reason=(
                    "I did not take your message: it would close the request that waits for an "
                    f"answer in this thread. {refusal}"
                ),
                interaction_id=record.interaction_id,
                run_id=run_id,
            )
            return True
        return False
