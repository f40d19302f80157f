"""Answering interactions from Slack: clicks, modals and thread replies, each claimed once.

A click is only a reference to a stored interaction. `Answers` wires the click path's pieces,
in the order an answer meets them: taken (`_take`: looked up and checked), claimed (`_claim`:
atomically, with the resume when it is the last answer), told (`_refuse`: every refusal is an
ephemeral message and an audit entry), and recovered (`_recovery`) when a process died between
the claim and the resume. Clicks, modals and thread replies enter through `_clicks`, `_modals`
and `_replies`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import AnswerStore

from ._chat import Chat
from ._claim import Claims
from ._clicks import Clicks
from ._conversation import Conversations
from ._home import Home
from ._modals import Modals, SubmissionCheck
from ._policy import AnswerPolicy, GroupMembers
from ._recheck import Recheck
from ._recovery import Recovery
from ._refusal import Refusal
from ._refuse import Refuser, user_and_channel
from ._replies import Replies
from ._resume import Resumes
from ._take import Expire, Take
from ._turns import Thread
from ._visibility import Visibility
from ._votes import Votes
from ._worker import Work

__all__ = ["Answers", "Refusal", "SubmissionCheck", "user_and_channel"]


class Answers:
    """Turns what people do in Slack into claimed answers and resumed runs."""

    def __init__(
        self,
        *,
        store: AnswerStore,
        chat: Chat,
        conversations: Conversations,
        policy: AnswerPolicy,
        members: GroupMembers,
        expire: Expire,
        clock: Callable[[], float] = time.time,
        visibility: Visibility,
        fresh_members: GroupMembers | None = None,
        home: Home | None = None,
    ) -> None:
        cards = conversations.cards
        refuser = Refuser(store=store, chat=chat, visibility=visibility, home=home, clock=clock)
        # User groups read without a cache: approvals are checked against them again just
        # before a run resumes (`members` may be a minute old).
        recheck = Recheck(
            store=store,
            chat=chat,
            cards=cards,
            policy=policy,
            fresh_members=fresh_members or members,
            clock=clock,
        )
        take = Take(
            store=store,
            chat=chat,
            policy=policy,
            members=members,
            expire=expire,
            visibility=visibility,
            home=home,
            clock=clock,
        )
        resumes = Resumes(store=store, conversations=conversations, recheck=recheck)
        claims = Claims(
            store=store,
            conversations=conversations,
            recheck=recheck,
            resumes=resumes,
            votes=Votes(store=store, cards=cards, recheck=recheck, refuse=refuser.refuse),
            refuser=refuser,
            clock=clock,
        )
        self.clicks = Clicks(
            store=store,
            chat=chat,
            conversations=conversations,
            take=take,
            claims=claims,
            refuser=refuser,
            home=home,
            clock=clock,
        )
        self.modals = Modals(conversations=conversations, take=take, claims=claims, refuser=refuser)
        self.replies = Replies(
            store=store,
            policy=policy,
            members=members,
            take=take,
            claims=claims,
            refuser=refuser,
            clock=clock,
        )
        self.recovery = Recovery(store=store, conversations=conversations, recheck=recheck)

    async def on_action(self, body: dict[str, Any], *, work: Work | None = None) -> None:
        """Handle one `block_actions` payload (after the ack); `work` is its inbox item."""
        await self.clicks.on_action(body, work=work)

    def not_recorded(self, body: dict[str, Any], message: str) -> SubmissionCheck:
        """The modal stays open with `message` shown inline, so the person can submit again."""
        return self.modals.not_recorded(body, message)

    async def check_submission(self, body: dict[str, Any]) -> SubmissionCheck:
        """Validate a `view_submission` before the ack, so errors can show inline."""
        return await self.modals.check_submission(body)

    async def on_modal_answer(self, item: dict[str, Any], *, work: Work | None = None) -> None:
        """Claim a modal's answer (a `view` work item, checked before its ack)."""
        await self.modals.on_modal_answer(item, work=work)

    async def on_thread_reply(
        self, thread: Thread, *, user: str, text: str, work: Work | None = None
    ) -> bool:
        """Answer the thread's pending free-text question with a reply; False if there is none."""
        return await self.replies.on_thread_reply(thread, user=user, text=text, work=work)

    async def holds_thread(self, thread: Thread, *, user: str) -> bool:
        """True, and the person is told why, when their message may not move the thread on."""
        return await self.replies.holds_thread(thread, user=user)

    async def recover(self, *, page: int = 100, patient: bool = False) -> int:
        """Queue the resume of every settled run never resumed (`Recovery.recover`)."""
        return await self.recovery.recover(page=page, patient=patient)

    async def recover_run(self, run_id: str, *, work: Work) -> bool:
        """Resume one settled run (a `recover` work item)."""
        return await self.recovery.recover_run(run_id, work=work)
