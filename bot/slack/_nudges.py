"""Reminders and escalations of approvals nobody answered (`Approval.remind_after`,
`escalate_to`): the periodic sweep fires each once, in the request's thread.

The store says what is due and records that it fired (`due_nudges`, `mark_nudged`), so each
fires once however many processes sweep and across restarts. A nudge fires after its mark is
won: a process that dies in between loses that one message, and never sends it twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence

import blocks
from state import AuditEntry, CorruptRecordError, InteractionRecord, approval_of

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import AuditedInteractions

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import Nudge

from ._chat import Chat, escape
from ._policy import AnswerPolicy

__all__ = ["Nudges"]

log = logging.getLogger("handback.slack")


class Nudges:
    """Fires due reminders and escalations; `sweep()` is one pass."""

    def __init__(
        self,
        *,
        store: AuditedInteractions,
        chat: Chat,
        policy: AnswerPolicy,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.policy = policy
        self.clock = clock
        self.changed: Callable[[Iterable[InteractionRecord]], None] | None = None
        """Told of a request that escalated, so App Home views of the people it adds show it."""

    async def sweep(self) -> int:
        """Fire what is due now; how many fired here (another process may fire some)."""
        fired = 0
        for nudge in await self.store.due_nudges(self.clock()):
            try:
                if await self.fire(nudge):
                    fired += 1
            except Exception:
                log.exception(
                    "could not send the %s of interaction %s",
                    nudge.kind,
                    nudge.record.interaction_id,
                )
        return fired

    async def fire(self, nudge: Nudge) -> bool:
        """Mark the nudge fired (once, atomically), audit it and tell the thread; False when
        another process fired it or the request was answered, closed or expired meanwhile."""
        now = self.clock()
        claim = await self.store.mark_nudged(nudge.record.interaction_id, nudge.kind, now=now)
        if not claim.won or claim.record is None:
            return False
        record = claim.record
        try:
            allowed = self.policy.approvers_of(record)
        except CorruptRecordError:
            # A rule that cannot be read schedules nothing; one that broke since names nobody.
            log.error("interaction %s: its approval rule cannot be read", record.interaction_id)
            allowed = ()
        escalation = nudge.kind == "escalation"
        added = _escalated_to(record) if escalation else ()
        await self.store.audit(
            AuditEntry(
                at=now,
                action="escalated" if escalation else "reminded",
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                detail=(
                    f"added {', '.join(added)}; may approve: {', '.join(allowed) or 'nobody'}"
                    if escalation
                    else f"may approve: {', '.join(allowed) or 'nobody'}"
                ),
            )
        )
        if escalation:
            await self._escalate(record, allowed, added)
            if self.changed is not None:
                self.changed([record])
        else:
            await self._remind(record, allowed)
        return True

    async def _remind(self, record: InteractionRecord, allowed: Sequence[str]) -> None:
        tool = _tool(record)
        who = blocks.approver_mentions([entry for entry in allowed if entry != blocks.ANYONE])
        text = (
            f":bell: Reminder: the request to run {tool} still waits for approval. {who}, "
            "can one of you take a look?"
            if who
            else f":bell: Reminder: the request to run {tool} still waits for an approver."
        )
        await self._tell(record, text, allowed)

    async def _escalate(
        self, record: InteractionRecord, allowed: Sequence[str], added: Sequence[str]
    ) -> None:
        tool = _tool(record)
        newcomers = blocks.approver_mentions(added)
        await self._tell(
            record,
            f":arrow_up: {_approved_so_far(record, tool)}, so it is escalated: "
            f"{newcomers} may approve it now too.",
            added,
        )
        if record.channel and record.message_ts:
            who = blocks.approver_mentions(allowed) or "nobody (no approver rule is set)"
            card = blocks.with_note(
                blocks.render_card(record, approvers=allowed),
                f":arrow_up: Escalated. Who may approve now: {who}",
            )
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )

    async def _tell(self, record: InteractionRecord, text: str, people: Sequence[str]) -> None:
        """In the request's thread, and, where only its requester can see that thread (a direct
        message with the bot), in a direct message to each person named too."""
        if not record.channel:
            return
        thread_ts = record.thread_ts or record.message_ts
        await self.chat.post(record.channel, text, thread_ts=thread_ts)
        if not record.channel.startswith("D"):
            return
        asker = blocks.approver_mentions([record.requester]) if record.requester else "Someone"
        for user in people:
            if user[:1] not in ("U", "W") or user == record.requester:
                continue
            # A user id as the channel posts in the app's direct message with that person.
            await self.chat.post(
                user,
                f"{text}\n{asker} asked for it in a direct message with me, which only they "
                "can see: ask them to mention me in a channel you are in, where you can approve "
                "it.",
            )


def _tool(record: InteractionRecord) -> str:
    return f"`{escape(str(record.payload.get('tool') or 'a tool'))}`"


def _escalated_to(record: InteractionRecord) -> tuple[str, ...]:
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return ()
    return () if rule is None else tuple(rule.escalate_to)


def _approved_so_far(record: InteractionRecord, tool: str) -> str:
    """How far the request's approval got, in words: "Nobody has approved the request to run
    `deploy` yet" or, under a two-person rule, "1 of 2 approvals so far (<@U…>) for ..."."""
    if not record.votes:
        return f"Nobody has approved the request to run {tool} yet"
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        rule = None
    needed = rule.count if rule is not None else len(record.votes) + 1
    who = blocks.approver_mentions([vote.user for vote in record.votes])
    return f"{len(record.votes)} of {needed} approvals so far ({who}) for the request to run {tool}"
