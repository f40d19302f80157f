"""Answering interactions from Slack: clicks, modals and thread replies, each claimed once.

A click is only a reference to a stored interaction. The interaction is looked up, checked
(still pending, not expired, this person may answer, the answer is valid for what was offered),
claimed atomically, shown as answered, and the run resumes once every interaction it waits for
has an answer. Every refusal is an ephemeral message to the person and an audit entry.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import blocks
from blocks import ELICITATION, CardAction, InvalidAnswer, ModalSubmission
from state import (
    AuditEntry,
    CorruptRecordError,
    InteractionRecord,
    InteractionStatus,
    Store,
    StoreError,
    approval_of,
)

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import AnswerClaim, ThreadTake, TurnClaim

from .. import Cancel, _logging, _metrics
from .._errors import ApprovalPolicyError
from .._redact import redact, redact_schema
from .._tool import ArgumentsError
from ._chat import Chat
from ._conversation import Conversations
from ._expiry import EXPIRED_REASON
from ._grants import revoke_grant
from ._home import NOT_IN_HOME, Home
from ._live import answer_live
from ._policy import AnswerPolicy, GroupMembers
from ._recheck import Recheck
from ._refusal import NOT_YOURS, Refusal
from ._stops import stop_guard, stopped_notice
from ._turns import Thread, TurnHold
from ._visibility import Visibility
from ._votes import Votes, approves, voted, votes_needed
from ._worker import Work

__all__ = ["Answers", "Refusal", "SubmissionCheck", "user_and_channel"]

log = logging.getLogger("handback.slack")

Expire = Callable[[InteractionRecord], Awaitable[None]]

_ELSEWHERE = "This control does not belong to a request in this channel."

_EDIT_DETAIL_LIMIT = 4000
"""Characters of audit detail for an edited approval, which holds the arguments twice."""

_DENY_ACTIONS = frozenset({blocks.ACTION_DENY, blocks.ACTION_DENY_REASON})
"""Controls whose only possible answer is a Deny."""


@dataclass(kw_only=True)
class SubmissionCheck:
    """The outcome of validating a modal before acking it: inline errors, or an answer to claim."""

    errors: dict[str, str] | None = None
    """By input block id, for `ack(response_action="errors", errors=...)`."""
    record: InteractionRecord | None = None
    answer: Any = None
    notice: str | None = None
    """A refusal that cannot be shown inline (the view has no input block)."""
    teams: tuple[str, ...] = ()
    """The workspaces the submission named, checked again when its answer is claimed."""


class Answers:
    """Turns what people do in Slack into claimed answers and resumed runs."""

    def __init__(
        self,
        *,
        store: Store,
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
        self.store = store
        self.chat = chat
        self.conversations = conversations
        self.policy = policy
        self.members = members
        self.fresh_members = fresh_members or members
        """User groups read without a cache: approvals are checked against them again just
        before a run resumes (`members` may be a minute old)."""
        self.expire = expire
        self.clock = clock
        self.home = home
        """Publishes App Home views: clicks made there are answered there."""
        self.visibility = visibility
        """Who can see a request's conversation: modal answers are taken only from them, and
        refusals to anyone else say nothing of the request."""
        self._settled_before: set[str] = set()
        """Runs the last patient `recover()` found settled."""
        self._recheck = Recheck(
            store=store,
            chat=chat,
            cards=conversations.cards,
            policy=policy,
            fresh_members=self.fresh_members,
            clock=clock,
        )
        self._votes = Votes(
            store=store, cards=conversations.cards, recheck=self._recheck, refuse=self._refuse
        )

    # ---------------------------------------------------------------- checks

    async def _pending(
        self,
        interaction_id: str,
        user: str,
        *,
        channel: str | None,
        denying: bool = False,
        work: Work | None = None,
    ) -> InteractionRecord:
        """The pending interaction this person may answer, or a `Refusal` saying why not;
        `channel` is where the answer was given (None only for a modal, which has no channel),
        `denying` when the answer can only be a Deny (the requester may withdraw a request).

        A retried work item may find the interaction answered by this very person (or, under the
        two-person rule, answered with this person's vote in it): its first attempt claimed it
        (or voted) and died. That is returned too, so `accept()` can finish the work.
        """
        _logging.bind(interaction_id=interaction_id)
        read, record = (False, None) if work is None else work.read_with_item(interaction_id)
        if not read:
            record = await self.store.get_interaction(interaction_id)
        if record is None:
            raise Refusal("handback has no such request; this control cannot be used.")
        if channel is not None and channel != record.channel:
            raise Refusal(_ELSEWHERE)
        if record.status == "pending" and record.expires_at <= self.clock():
            # The sweeper has not got to it yet; expire it now (in the background) and say so.
            await self.expire(record)
            raise Refusal("This request expired, so it can no longer be answered.", record=record)
        if _own_earlier_answer(record, user, work) or _own_earlier_vote(record, user, work):
            return record
        if record.status != "pending":
            raise Refusal(_closed_reason(record), record=record)
        refusal = await self.policy.refusal(record, user, self.members, denying=denying)
        if refusal is not None:
            raise Refusal(refusal, record=record)
        return record

    async def _check_modal(
        self, record: InteractionRecord, user: str, teams: tuple[str, ...]
    ) -> None:
        """A modal's answer gets the checks a click's channel gives it: a modal has no
        channel, so its submitter must be able to see the request's conversation, from the
        app's own workspace (and no other). Fails closed: `Refusal`."""
        team = await self.chat.team_id()
        if team is None or not teams or any(given != team for given in teams):
            raise Refusal(NOT_YOURS, record=record)
        if not await self.visibility.can_see(record, user):
            raise Refusal(NOT_YOURS, record=record)

    async def _told(self, reason: str, user: str, record: InteractionRecord | None) -> str:
        """What to tell `user` of a refusal: the reason, or `NOT_YOURS` when they cannot see
        the request's conversation (the reason may name its tool or who answered it)."""
        if record is None or reason == NOT_YOURS or not user:
            return reason
        return reason if await self.visibility.can_see(record, user) else NOT_YOURS

    async def _refuse(
        self,
        *,
        user: str,
        channel: str | None,
        thread_ts: str | None,
        reason: str,
        interaction_id: str | None,
        run_id: str | None = None,
        home: bool = False,
        record: InteractionRecord | None = None,
    ) -> None:
        """Audit the refusal and tell the person: ephemeral in the channel, or, for a click in
        App Home (`home`, which has no channel), on top of their republished view. Told
        `NOT_YOURS` instead when they cannot see `record`'s conversation."""
        _metrics.answer_refused(reason)
        told = await self._told(reason, user, record)
        await self.store.audit(
            AuditEntry(
                at=self.clock(),
                action="refused",
                interaction_id=interaction_id,
                run_id=run_id,
                user=user,
                detail=reason if told == reason else f"{reason} (told: {told})",
            )
        )
        outsider, reason = told != reason, told
        if home and self.home is not None:
            await self.home.publish(user, notice=reason)
        elif channel and await self.chat.ephemeral(channel, user, reason, thread_ts=thread_ts):
            pass
        elif outsider and user:
            # Slack refuses an ephemeral message to someone who is not in the channel: they
            # are told in their DM with the app instead (it names nothing of the request).
            await self.chat.post(user, reason)
        else:
            log.info("refused %s for %s: %s", interaction_id, user, reason)

    # ----------------------------------------------------------------- clicks

    async def on_action(self, body: dict[str, Any], *, work: Work | None = None) -> None:
        """Handle one `block_actions` payload (after the ack); `work` is its inbox item."""
        try:
            action = blocks.parse_block_action(body)
        except InvalidAnswer as error:
            user, channel = user_and_channel(body)
            await self._refuse(
                user=user, channel=channel, thread_ts=None, reason=str(error), interaction_id=None
            )
            return
        if action.intent == "selection":
            return  # Ticking options only changes the card's state; Submit reads it.
        record: InteractionRecord | None = None
        in_home = action.origin == "home"
        try:
            if action.action == blocks.ACTION_REVOKE:
                await self._revoke(action)
                return
            if action.channel_id is None and not in_home:
                # A card is always in a channel, and Slack says which (the payload's channel or
                # its container); a click that does not cannot be checked against the card's.
                # Only a click Slack says was made in App Home has none (`origin`).
                raise Refusal(_ELSEWHERE)
            record = await self._pending(
                action.interaction_id,
                action.user_id,
                channel=action.channel_id,
                denying=action.action in _DENY_ACTIONS,
                work=work,
            )
            if in_home:
                await self._check_home(record, action.user_id, work)
            else:
                await self._check_card(record, action.user_id, work)
            if not record.message_ts and action.message_ts and record.channel:
                # A crash between posting the card and saving where it went leaves no ts; the
                # click comes from the card itself, so it says where the card is.
                await self.store.set_message(
                    record.interaction_id, channel=record.channel, message_ts=action.message_ts
                )
                record.message_ts = action.message_ts
            if action.intent == "page" and in_home and self.home is not None:
                # Home shows no paging buttons (they page the card in the thread); a stale view
                # that had one is just drawn again.
                await self.home.publish(action.user_id)
            elif action.intent == "page":
                await self._show_page(record, action)
            elif action.intent == "open_modal":
                await self._open_modal(record, action)
            else:
                answer = blocks.resolve_answer(record, action)
                await self.accept(
                    record, user=action.user_id, answer=answer, work=work, home=in_home
                )
        except (Refusal, InvalidAnswer) as error:
            if isinstance(error, Refusal) and error.record is not None:
                record = error.record
            await self._refuse(
                user=action.user_id,
                channel=action.channel_id,
                thread_ts=action.thread_ts,
                reason=str(error),
                interaction_id=action.interaction_id,
                run_id=record.run_id if record else None,
                home=in_home,
                record=record,
            )
        if record is not None and blocks.is_url_mode(record) and action.response_url:
            # An ephemeral card: its click's URL is the one way to show how it stands now.
            await self.conversations.cards.replace_clicked(
                record.interaction_id, action.response_url
            )

    async def _revoke(self, action: CardAction) -> None:
        """Revoke in someone's Home: the block id names a grant, checked against the stored one
        (only whoever gave it may revoke it there; operators use `handback grants revoke`).
        The revoke is atomic and audited in the store; the thread it covered is told, and the
        view is drawn again saying what happened."""
        user = action.user_id
        if action.origin != "home" or self.home is None:
            raise Refusal("A standing grant is revoked from the App Home of whoever gave it.")
        grant = await self.store.get_grant(action.interaction_id)
        if grant is None or grant.granted_by != user:
            raise Refusal("This standing grant is not one you gave, so you cannot revoke it.")
        claim = await revoke_grant(self.store, grant.grant_id, by=user, now=self.clock())
        tool = blocks.escape(grant.tool)
        where = "this thread" if grant.scope == "thread" else f"<#{grant.channel}>"
        if not claim.won:
            await self.home.publish(user, notice=f"Your grant for `{tool}` had already ended.")
            return
        if grant.thread_ts:
            await self.chat.post(
                grant.channel,
                f"<@{user}> revoked the standing grant for `{tool}` in {where}: its next calls "
                "ask for approval again.",
                thread_ts=grant.thread_ts,
            )
        await self.home.publish(user, notice=f"Revoked your grant for `{tool}` in {where}.")

    async def _check_home(self, record: InteractionRecord, user: str, work: Work | None) -> None:
        """A click in App Home is taken only for a request Home would list for this person
        (`Home.refusal`), on top of the card's checks; a retry of their own claim goes on."""
        if _own_earlier_answer(record, user, work) or _own_earlier_vote(record, user, work):
            return
        refusal = NOT_IN_HOME if self.home is None else await self.home.refusal(record, user)
        if refusal is not None:
            raise Refusal(refusal)

    async def _check_card(self, record: InteractionRecord, user: str, work: Work | None) -> None:
        """A click on a card is taken only from someone who can see the conversation it is in
        (`Visibility`, as for Home and modals): a forged click on a DM's or a private channel's
        request by someone outside it is refused. Run by the worker before the claim, never on
        the ack path; for a public channel it is one cached `conversations.info`. Fails closed."""
        if _own_earlier_answer(record, user, work) or _own_earlier_vote(record, user, work):
            return
        if not await self.visibility.can_see(record, user):
            raise Refusal(NOT_YOURS, record=record)

    async def _show_page(self, record: InteractionRecord, action: CardAction) -> None:
        page = blocks.page_from_action(record, action)
        if not (record.channel and record.message_ts):
            return
        card = self.conversations.cards.card(record, page=page)
        await self.chat.update(
            record.channel, record.message_ts, card["text"], blocks=card["blocks"]
        )
        # Someone may have answered while this page was drawn; their card update can land before
        # this one, which would bring the buttons back. Show the stored state if it moved on.
        now = await self.store.get_interaction(record.interaction_id)
        if now is not None and now.status != "pending":
            card = self.conversations.cards.card(now)
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )

    async def _open_modal(self, record: InteractionRecord, action: CardAction) -> None:
        if not action.trigger_id:
            raise InvalidAnswer("Slack sent no trigger to open the form with.")
        if action.action == blocks.ACTION_EDIT:
            # Checked against the stored rule, not the card: a stale or forged button on a
            # rule that does not allow edits opens nothing.
            view = blocks.render_edit_modal(record)
            if view is None:
                raise InvalidAnswer("The arguments of this request cannot be edited.")
        else:
            # For an approval this is the deny-with-reason form, else the answer form.
            view = blocks.render_modal(record)
        if not await self.chat.open_view(action.trigger_id, view):
            raise Refusal("Slack did not open the form; please try again.")

    # ----------------------------------------------------------------- modals

    def not_recorded(self, body: dict[str, Any], message: str) -> SubmissionCheck:
        """The modal stays open with `message` shown inline, so the person can submit again."""
        return self._inline(message, _first_input_block(body))

    async def check_submission(self, body: dict[str, Any]) -> SubmissionCheck:
        """Validate a `view_submission` before the ack, so errors can show inline."""
        user, _ = user_and_channel(body)
        first_input = _first_input_block(body)
        try:
            submission: ModalSubmission = blocks.parse_view_submission(body)
        except InvalidAnswer as error:
            return self._inline(str(error), first_input)
        record: InteractionRecord | None = None
        try:
            record = await self._pending(
                submission.interaction_id,
                user,
                channel=None,
                denying=submission.callback_id == blocks.CALLBACK_DENY_MODAL,
            )
            await self._check_modal(record, user, submission.teams)
            answer = blocks.answer_from_submission(record, submission)
            if submission.callback_id == blocks.CALLBACK_EDIT_MODAL:
                problem = await self._edit_problem(record, answer)
                if problem is not None:
                    raise Refusal(problem, record=record)
        except Refusal as error:
            record = error.record or record
            told = await self._told(str(error), user, record)
            _metrics.answer_refused(str(error))
            await self.store.audit(
                AuditEntry(
                    at=self.clock(),
                    action="refused",
                    interaction_id=submission.interaction_id,
                    run_id=record.run_id if record else None,
                    user=user,
                    detail=str(error) if told == str(error) else f"{error} (told: {told})",
                )
            )
            return self._inline(told, first_input)
        except InvalidAnswer as error:
            if error.errors:
                return SubmissionCheck(errors=error.errors)
            return self._inline(str(error), first_input)
        return SubmissionCheck(record=record, answer=answer, teams=submission.teams)

    async def on_modal_answer(self, item: dict[str, Any], *, work: Work | None = None) -> None:
        """Claim a modal's answer (a `view` work item, checked before its ack): every check
        is made again first, the submitter's and the request's, since either may have changed
        (or the item may not come from this app's own check)."""
        user = str(item["user"])
        answer = item["answer"]
        teams = tuple(str(team) for team in item.get("teams") or ())
        record: InteractionRecord | None = None
        try:
            record = await self._pending(
                str(item["interaction_id"]),
                user,
                channel=None,
                # Only an approval's Deny may come from its requester (`policy.refusal`).
                denying=not approves(answer),
                work=work,
            )
            await self._check_modal(record, user, teams)
        except Refusal as error:
            record = error.record or record
            await self._refuse(
                user=user,
                channel=record.channel if record else None,
                thread_ts=record.thread_ts if record else None,
                reason=str(error),
                interaction_id=str(item["interaction_id"]),
                run_id=record.run_id if record else None,
                record=record,
            )
            return
        await self.accept(record, user=user, answer=answer, work=work)

    async def _edit_problem(self, record: InteractionRecord, answer: Any) -> str | None:
        """Why the runtime would not run an edit: with the edited arguments the tool's policy
        asks for another rule than the request was made under (say, two approvers for prod
        where one approved staging). Told inline, before anything is claimed, so the approver
        denies and asks again instead, and the card never says "approved" for a call the gate
        then refuses. An argument shown hidden keeps the model's value, which is not here: the
        policy is asked with each value it could stand for (its default, the hidden mark) and
        any of them needing another rule is a problem, as is a policy that cannot be asked
        with any (fail closed). None when the edit may go on, or when this agent's tool is not
        the one that asked (the gate checks it again in any case)."""
        name = str(record.payload.get("tool", ""))
        tool = self.conversations.agent.tools.get(name)
        shown = record.payload.get("arguments")
        if (
            tool is None
            or not isinstance(shown, dict)
            or redact_schema(tool.parameters, tool.redact) != record.payload.get("arguments_schema")
        ):
            return None
        try:
            asked = approval_of(record)
        except CorruptRecordError:
            return None  # The claim refuses a rule that does not read back.
        locked = set(blocks.locked_arguments(record))
        edits = {k: v for k, v in answer["arguments"].items() if k not in locked}
        needed: list[Any] = []
        for hidden in _hidden_candidates(tool.parameters, shown, locked):
            try:
                arguments = tool.parse_arguments(json.dumps({**shown, **hidden, **edits}))
                needed.append(await tool.approval_for(arguments))
            except (ArgumentsError, ApprovalPolicyError):
                continue
        if needed and all(rule is None or rule == asked for rule in needed):
            return None
        if not needed:
            return (
                f"I cannot check the edited arguments of `{name}` against its approval rule "
                "here. Deny it and ask again instead."
            )
        return (
            f"With these arguments `{name}` needs a different approval than this request was "
            "made under. Deny it and ask again instead."
        )

    @staticmethod
    def _inline(message: str, block_id: str | None) -> SubmissionCheck:
        if block_id is None:
            return SubmissionCheck(notice=message)
        return SubmissionCheck(errors={block_id: message[:150]})

    # ------------------------------------------------------------ thread replies

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
            record = await self._pending(record.interaction_id, user, channel=thread.channel)
            answer = blocks.answer_from_text(record, text)
        except (Refusal, InvalidAnswer) as error:
            await self._refuse(
                user=user,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                reason=str(error),
                interaction_id=record.interaction_id,
                run_id=run_id,
            )
            return True
        await self.accept(record, user=user, answer=answer, work=work)
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
                if blocks.accepts_text_reply(record) and _own_earlier_answer(record, user, work):
                    answer = blocks.answer_from_text(record, text)
                    await self.accept(record, user=user, answer=answer, work=work)
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
            await self._refuse(
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

    # ----------------------------------------------------------------- claiming

    async def accept(
        self,
        record: InteractionRecord,
        *,
        user: str,
        answer: Any,
        work: Work | None = None,
        home: bool = False,
    ) -> None:
        """Claim the interaction for this answer; the first answer wins, later ones are told.

        The claim, its audit entry and, when this answer is the last the run waits for, the
        run's claim and the thread's lease are one atomic step in the store
        (`answer_and_claim`), so the resume that follows reads nothing before it runs. A run
        that waits for other answers too, or a thread busy with another turn, is resumed the
        long way (`resume_if_complete`), where the runtime claims the run.

        A retried work item finds its own earlier claim (same person, same answer): it goes on
        to the resume its first attempt may not have finished, and is not told "already".

        An Approve of a rule with `count` > 1 is one vote (`answer_and_claim(needed=...)`):
        before the last, the card shows who approved so far and stays open; the last answers
        with every approver and resumes as above. The same person twice counts once, and is
        told so.
        """
        note: str | None = None
        try:
            needed = votes_needed(record, answer)
        except Refusal as error:
            refusal: str | None = str(error)
        else:
            refusal, note = await self._recheck.refusal_now(record, user=user, answer=answer)
        if refusal is not None:
            await self._refuse(
                user=user,
                channel=record.channel,
                thread_ts=record.thread_ts,
                reason=refusal,
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                home=home,
                record=record,
            )
            return
        if blocks.is_live(record):
            # Asked during an open call: the process holding it takes the answer from the store.
            await answer_live(
                self.store,
                self.conversations.cards,
                record,
                user=user,
                answer=answer,
                clock=self.clock,
                refuse=lambda reason: self._refuse(
                    user=user,
                    channel=record.channel,
                    thread_ts=record.thread_ts,
                    reason=reason,
                    interaction_id=record.interaction_id,
                    run_id=record.run_id,
                    home=home,
                    record=record,
                ),
            )
            return
        if needed > 1:
            # A vote: the store adds who approved to the answer, with the last vote.
            kept = answer.items() if isinstance(answer, dict) else {"approved": True}.items()
            answer = {key: value for key, value in kept if key != "approvers"}
        thread = _thread_of(record)
        child_id = None if work is None else work.run_id("resume")
        hold = None if child_id is None else await self.conversations.turns.hold_turn(thread)
        try:
            claim = await self._claim(
                record, user=user, answer=answer, child_id=child_id, hold=hold, needed=needed
            )
            if claim.record is not None and (
                claim.won or _own_earlier_answer(claim.record, user, work, answer)
            ):
                # A grant given with the answer: added after the claim under an id derived from
                # the interaction, so a retry of this item after a crash adds it, once.
                await self.conversations.grants.give(claim.record)
        except BaseException:
            if hold is not None:
                self.conversations.turns.let_go(hold)
            raise
        stored, now = claim.record, self.clock()
        if claim.stopped is not None:
            # The turn that asked was stopped since: the store took nothing (checked with the
            # answer), and the approver hears who stopped it and that nothing runs.
            if hold is not None:
                self.conversations.turns.let_go(hold)
            await self._refuse(
                user=user,
                channel=record.channel,
                thread_ts=record.thread_ts,
                reason=stopped_notice(claim.stopped),
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                home=home,
                record=record,
            )
            return
        if claim.run is not None and stored is not None and hold is not None:
            _metrics.ANSWERS.labels(outcome="accepted").inc()
            # The stop mark the resumed turn starts from came with the claim, read before
            # anything could show `processing`: the turn needs no read of its own.
            self.conversations.turns.leased(hold, ThreadTake(held=True, stop=claim.stop))
            try:
                await self.conversations.cards.show_closed(stored)
            except BaseException:
                self.conversations.turns.let_go(hold)
                raise
            await self.conversations.resume(
                run_id=stored.run_id,
                answers={stored.interaction_id: stored.answer},
                thread=thread,
                working_ts=stored.message_ts,
                child_id=child_id,
                hold=hold,
                claimed=claim.run,
                by=_shaped_by([stored]),
            )
            return
        if hold is not None:
            self.conversations.turns.let_go(hold)
        if (
            stored is not None
            and stored.status == "pending"
            and stored.expires_at > now
            and voted(stored, user)
        ):
            await self._votes.counted(
                stored, user=user, partial=claim.partial, work=work, note=note
            )
            return
        if (
            not claim.won
            and stored is not None
            and (
                _own_earlier_answer(stored, user, work, answer)
                or _own_earlier_vote(stored, user, work, answer)
            )
        ):
            await self.conversations.cards.show_closed(stored)
            await self.resume_if_complete(
                stored.run_id, working_ts=stored.message_ts, child_id=child_id
            )
            return
        if not claim.won or stored is None:
            reason = _closed_reason(stored) if stored else "handback has no such request."
            if stored is not None and stored.status == "pending" and stored.expires_at > now:
                # Still open, yet lost: the store found the approval's rule at odds with the
                # number of approvers asked for (it fails closed), so nothing was approved.
                reason = (
                    "This request's approval rule could not be checked, so nobody can approve it."
                )
            await self._refuse(
                user=user,
                channel=record.channel,
                thread_ts=record.thread_ts,
                reason=reason,
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                home=home,
                record=record,
            )
            return
        _metrics.ANSWERS.labels(outcome="accepted").inc()
        await self.conversations.cards.show_closed(stored)
        await self.resume_if_complete(
            stored.run_id, working_ts=stored.message_ts, child_id=child_id
        )

    async def _claim(
        self,
        record: InteractionRecord,
        *,
        user: str,
        answer: Any,
        child_id: str | None,
        hold: TurnHold | None,
        needed: int,
    ) -> AnswerClaim:
        now = self.clock()
        edit = self._edit_detail(record, answer)
        # An MCP tool's approval says on which server and why it was gated, as its card does.
        gated = record.payload.get("gated_because") if record.kind == "approval" else None
        server = record.payload.get("server")
        why = f" [MCP {server}: gated: {gated}]" if isinstance(gated, str) else ""
        if record.kind == ELICITATION:
            why = f" [MCP {server}: question of its tool {record.payload.get('tool')}]"
        entries = [
            AuditEntry(
                at=now,
                action="answered",
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                user=user,
                detail=(
                    f"approved {k} of {needed}"
                    if needed > 1
                    # A modal's answer may hold a secret typed into a field: masked as shown.
                    else (edit or _short_json(redact(answer)))
                )
                + why,
            )
            for k in range(1, needed + 1)
        ]
        turn = None
        if child_id is not None and hold is not None:
            turn = TurnClaim(
                run_id=record.run_id,
                child_id=child_id,
                lease=hold.lease,
                lease_ttl=self.conversations.turns.lease_ttl,
            )
        return await self.store.answer_and_claim(
            record.interaction_id,
            answer=answer,
            answered_by=user,
            now=now,
            audit=entries,
            turn=turn,
            needed=needed,
            stop=stop_guard(record),
        )

    def _edit_detail(self, record: InteractionRecord, answer: Any) -> str | None:
        """The audit detail of an approval given with edited arguments: both versions, the
        call's as the card showed it and the edited one it runs with, redacted as the card is
        (an approver may type a secret into an object argument). None for any other answer."""
        edits = answer.get("arguments") if isinstance(answer, dict) else None
        if record.kind != "approval" or not isinstance(edits, dict):
            return None
        original = record.payload.get("arguments")
        original = original if isinstance(original, dict) else {}
        locked = set(blocks.locked_arguments(record))
        edited = {**original, **{k: v for k, v in edits.items() if k not in locked}}
        tool = self.conversations.agent.tools.get(str(record.payload.get("tool", "")))
        detail = {
            "approved": answer.get("approved") is True,
            "arguments": {
                "original": redact(original),
                "edited": redact(edited, tool.redact if tool else frozenset()),
            },
        }
        return _short_json(detail, limit=_EDIT_DETAIL_LIMIT)

    async def resume_if_complete(
        self, run_id: str, *, working_ts: str | None = None, child_id: str | None = None
    ) -> bool:
        """Resume the run when every interaction it waits for is answered (the runtime claims
        the run, so two processes racing here resume it once)."""
        records = await self.store.run_interactions(run_id)
        if not records or any(record.status != "answered" for record in records):
            return False
        if await self._recheck.withdraw_unallowed(records):
            return False
        await self.conversations.resume(
            run_id=run_id,
            answers={record.interaction_id: record.answer for record in records},
            thread=_thread_of(records[0]),
            working_ts=working_ts,
            child_id=child_id,
            by=_shaped_by(records),
        )
        return True

    async def recover(self, *, page: int = 100, patient: bool = False) -> int:
        """Queue the resume of every run that waits for nothing but was never resumed; how many
        were queued now (a run already queued, and not finished, is not queued twice).

        A crash between the last claim (an answer, or an expiry) and the resume leaves exactly
        that, and the store lists such runs itself (`settled_runs`). The sweep calls this every
        few seconds. The resume is an inbox item like a click, so a crash during it is retried
        with the same child run id; a click's resume racing it is harmless: the run is claimed
        once.

        `patient` (the periodic sweep) queues only runs that were settled at its previous pass
        too: a click's own resume usually claims the run within moments (or is queued behind a
        busy thread), and racing every one of those would double the work under load.
        """
        queued = 0
        after: str | None = None
        seen: set[str] = set()
        while run_ids := await self.store.settled_runs(limit=page, after=after):
            after = run_ids[-1]
            seen.update(run_ids)
            for run_id in run_ids:
                if patient and run_id not in self._settled_before:
                    continue
                try:
                    run = await self.store.load_run(run_id)
                except CorruptRecordError:
                    # One unreadable run must not keep the others from being recovered.
                    log.exception("cannot recover run %s", run_id)
                    continue
                if run is None or run.agent_name != self.conversations.agent.name:
                    continue  # Another agent's run in a shared store is that agent's to resume.
                key = f"recover:{run_id}"
                if await self.store.enqueue("recover", {"id": key, "run_id": run_id}, dedupe=key):
                    queued += 1
        if patient:
            self._settled_before = seen
        return queued

    async def recover_run(self, run_id: str, *, work: Work) -> bool:
        """Resume one settled run (a `recover` work item); False when it is not this agent's or
        not settled any more."""
        try:
            return await self._recover_run(run_id, child_id=work.run_id("resume"))
        except StoreError:
            raise
        except Exception:
            # An unreadable run is logged, not retried forever.
            log.exception("could not recover run %s", run_id)
            return False

    async def _recover_run(self, run_id: str, *, child_id: str) -> bool:
        run = await self.store.load_run(run_id)
        if run is None or run.agent_name != self.conversations.agent.name:
            return False  # Another agent's run in a shared store is that agent's to resume.
        records = await self.store.run_interactions(run_id)
        if not records or any(record.status == "pending" for record in records):
            return False
        if await self._recheck.withdraw_unallowed(records):
            return False
        log.info("recovering run %s: every answer is in, but it was never resumed", run_id)
        answers: dict[str, Any] = {}
        for record in records:
            if record.status == "answered":
                # The process that took the answer may have died before the card showed it.
                await self.conversations.cards.show_closed(record)
                answers[record.interaction_id] = record.answer
            else:
                # Closed unanswered by an expiry that was cut short: the card says so, and the
                # run is cancelled as the sweep would have done.
                await self.conversations.cards.show_closed(record)
                answers[record.interaction_id] = Cancel(_cancel_reason(record.status))
        await self.conversations.resume(
            run_id=run_id,
            answers=answers,
            thread=_thread_of(records[0]),
            child_id=child_id,
            by=_shaped_by(records),
        )
        return True


def _hidden_candidates(
    schema: dict[str, Any], shown: dict[str, Any], locked: set[str]
) -> list[dict[str, Any]]:
    """Values the hidden (`locked`) arguments could stand for when a policy is asked about an
    edit: each at its default where the tool has one (a secret left empty, say), and each as
    shown (the hidden mark, which fits any text argument)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    defaults: dict[str, Any] = {}
    for key in locked:
        spec = properties.get(key)
        if isinstance(spec, dict) and "default" in spec:
            defaults[key] = spec["default"]
        else:
            defaults[key] = shown.get(key)
    as_shown = {key: shown.get(key) for key in locked}
    return [defaults] if defaults == as_shown else [defaults, as_shown]


def _shaped_by(records: list[InteractionRecord]) -> list[str]:
    """Who, by answering these, shaped what the run does next: they count as requesters of the
    turn's later approvals (four eyes). A plain approval is not among them: it carries nothing
    the model could be steered with (a denial's reason does, and so does any answer to a
    question), and counting it would stop an approver from approving the next call of the same
    turn."""
    return [
        record.answered_by
        for record in records
        if record.answered_by and not (record.kind == "approval" and _plain_approval(record.answer))
    ]


def _plain_approval(answer: Any) -> bool:
    if isinstance(answer, dict):
        # Edited arguments are the approver's words in the call, as a reason would be.
        return (
            answer.get("approved") is True
            and not answer.get("reason")
            and "arguments" not in answer
        )
    return answer is True


def _own_earlier_answer(
    record: InteractionRecord, user: str, work: Work | None, answer: Any = None
) -> bool:
    """Whether `record` holds what an earlier attempt of this work item claimed: a retry, the
    same person, and (when given) the same answer. A double click is two items, never a retry."""
    return (
        work is not None
        and work.retry
        and record.status == "answered"
        and record.answered_by == user
        and (answer is None or record.answer in (answer, _with_voters(answer, record)))
    )


def _own_earlier_vote(
    record: InteractionRecord, user: str, work: Work | None, answer: Any = None
) -> bool:
    """Whether `record` is an approval someone else's last vote answered after an earlier
    attempt of this work item stored `user`'s vote (and died before it finished): that vote
    counted, so the retry finishes as its own, and its voter is not told "already answered".
    With `answer` (the claim's check; the click's checks before it have none), only for an
    Approve."""
    return (
        work is not None
        and work.retry
        and record.status == "answered"
        and (answer is None or approves(answer))
        and approves(record.answer)
        and voted(record, user)
    )


def _with_voters(answer: Any, record: InteractionRecord) -> Any:
    """`answer` as the store kept it when it was the last of several votes."""
    if not isinstance(answer, dict) or not record.votes:
        return answer
    return {**answer, "approvers": [vote.user for vote in record.votes]}


def _cancel_reason(status: InteractionStatus) -> str:
    if status == "expired":
        return EXPIRED_REASON
    if status == "superseded":
        return "the conversation moved on"
    return "the request was cancelled"


def _thread_of(record: InteractionRecord) -> Thread:
    return Thread(
        channel=record.channel,
        thread_ts=record.thread_ts or record.message_ts or "",
        requester=record.requester,
    )


def _closed_reason(record: InteractionRecord) -> str:
    match record.status:
        case "answered":
            who = f"<@{record.answered_by}>" if record.answered_by else "someone"
            return f"This was already answered by {who}."
        case "expired":
            return "This request expired, so it can no longer be answered."
        case "superseded":
            return "This request was closed because the conversation moved on."
        case "cancelled":
            return "This request was cancelled."
        case "pending":
            return "This request expired, so it can no longer be answered."


def _first_input_block(body: Any) -> str | None:
    """The block id inline errors can be shown under; None when the payload has no such block
    (or is not shaped like a view at all: this runs on payloads that failed to parse)."""
    view = body.get("view") if isinstance(body, dict) else None
    found = view.get("blocks") if isinstance(view, dict) else None
    for block in found if isinstance(found, list) else ():
        if not isinstance(block, dict) or block.get("type") != "input":
            continue
        block_id = block.get("block_id")
        if isinstance(block_id, str) and block_id:
            return block_id
    return None


def user_and_channel(body: Any) -> tuple[str, str | None]:
    """`(user id, channel id)` of a payload that may not have parsed, for telling the person;
    empty or None where the payload does not say (or says it with the wrong type)."""

    def field_id(key: str) -> str | None:
        value = body.get(key) if isinstance(body, dict) else None
        found = value.get("id") if isinstance(value, dict) else None
        return found if isinstance(found, str) and found else None

    return field_id("user") or "", field_id("channel")


def _short_json(value: Any, *, limit: int = 500) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
