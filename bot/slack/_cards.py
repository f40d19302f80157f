"""A run's requests as cards in its thread: each `InteractionEvent` placed in an
`InteractionRecord`, saved, then posted as a card (or answered by a standing grant, or said to be
lost when Slack refuses it); cards brought up to date as their requests close (answered, expired,
superseded, stopped)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import blocks
from state import AuditEntry, CorruptRecordError, InteractionRecord, is_approval

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import CardWork

from .._run import StoppedCall
from ..events import InteractionEvent
from ._agent_surface import is_dm
from ._chat import Chat
from ._grants import Grants, used_grant
from ._policy import AnswerPolicy, GroupMembers
from ._session import mention
from ._turns import Thread

__all__ = ["Cards"]

log = logging.getLogger("handback.slack")


class Cards:
    """Posts a run's cards in its thread and keeps them up to date with their records."""

    def __init__(
        self,
        *,
        store: CardWork,
        chat: Chat,
        ttl: float,
        grants: Grants,
        clock: Callable[[], float] = time.time,
        policy: AnswerPolicy | None = None,
        members: GroupMembers | None = None,
    ) -> None:
        self.store = store
        self.chat = chat
        self.ttl = ttl
        self.grants = grants
        self.clock = clock
        self.policy = policy
        self.members = members
        self.home_changed: Callable[[list[InteractionRecord]], None] | None = None
        """Told (without waiting) which requests were posted or closed, so App Home views that
        list them are refreshed."""

    async def post(
        self,
        run_id: str,
        events: list[InteractionEvent],
        thread: Thread,
        requesters: list[str],
        *,
        replayed: bool = False,
    ) -> set[str]:
        """Store the run's requests and post a card for each still pending; the ids of those
        a standing grant approved instead (no card), so the turn can say so.

        `replayed`: an earlier attempt of this turn paused the run, and may have posted a
        card and died before saving its ts. Such a card is looked for in the thread and kept,
        not posted again: a second card would leave the first one's buttons after the answer."""
        now = self.clock()
        placed = [
            InteractionRecord.placed(
                event.interaction,
                run_id=run_id,
                channel=thread.channel,
                thread_ts=thread.thread_ts,
                requester=thread.requester,
                requesters=requesters,
                created_at=now,
                expires_at=_expiry(event.interaction.payload, now + self.ttl),
            )
            for event in events
        ]
        # Stored before the cards exist, so a click can never find an unknown interaction. The
        # add says what each is now, in the same round trip: paused again on one still pending,
        # the record moves on but keeps its card (`message_ts`), created_at and expires_at.
        records: list[InteractionRecord] = []
        granted: set[str] = set()
        for record in await self.store.add_interactions(placed):
            if record.status == "pending":
                records.append(record)
            elif used_grant(record):
                # A retry of a turn whose first attempt approved this under a grant: no card;
                # the run's resume is queued below (again: the queue drops a repeat).
                granted.add(record.interaction_id)
            # Otherwise answered or closed already (its card, if any, says so): no card either.
        for record in records:
            if record.message_ts:
                continue
            if await self.grants.answer(record) is not None:
                granted.add(record.interaction_id)  # Approved under a standing grant: no card.
                continue
            if replayed and await self._posted_before(record, thread):
                continue
            card = self.card(record)
            if blocks.is_url_mode(record) and thread.requester:
                await self._post_ephemeral(record, thread, thread.requester, card)
                continue
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
        return granted

    async def _posted_before(self, record: InteractionRecord, thread: Thread) -> bool:
        """Whether the card of `record` is in the thread already (posted by the attempt that
        died): its ts is saved then, and the card, as that attempt drew it, stays."""
        ts = await self.chat.card_in_thread(thread.channel, thread.thread_ts, record.interaction_id)
        if ts is None:
            return False
        await self.store.set_message(record.interaction_id, channel=thread.channel, message_ts=ts)
        return True

    async def _resume_granted(self, run_id: str) -> None:
        """Queue the resume of a run whose approvals grants answered, once nothing else of it
        is pending: this turn holds the thread, so the resume runs as a work item after it, as
        the settled-run recovery would queue it (same work id, so the two never both run). A
        crash before this line leaves a settled run, which that recovery finds."""
        if any(r.status == "pending" for r in await self.store.run_interactions(run_id)):
            return  # A card waits too; its answer resumes the run with every answer.
        key = f"recover:{run_id}"
        await self.store.enqueue("recover", {"id": key, "run_id": run_id}, dedupe=key)

    async def _post_ephemeral(
        self, record: InteractionRecord, thread: Thread, user: str, card: blocks.Message
    ) -> None:
        """A URL to open is for the person whose request it is: their card alone
        (`chat.postEphemeral`). Its ts is not kept: `chat.update` cannot find an ephemeral
        message, so the card changes only through the `response_url` of a click on it."""
        if not await self.chat.ephemeral(
            thread.channel, user, card["text"], thread_ts=thread.thread_ts, blocks=card["blocks"]
        ):
            log.error("could not post the card of interaction %s", record.interaction_id)
            await self._card_lost(record, thread, card["text"])

    async def _note_unapprovable(self, record: InteractionRecord, thread: Thread) -> None:
        """In a DM nobody but the requester sees the card; say so when they may not approve it,
        instead of leaving a card that can only expire."""
        if (
            not is_approval(record)
            or not is_dm(thread.channel)
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
        if not is_approval(record) or self.policy is None:
            return None
        try:
            return self.policy.approvers_of(record)
        except CorruptRecordError:
            return None

    async def show_closed(self, record: InteractionRecord, *, note: str | None = None) -> None:
        """Bring the card up to date with the record: answered, expired, superseded, ...
        (an update that repeats one already made changes nothing); `note` replaces the line
        that says how it closed."""
        if record.channel and record.message_ts and not blocks.is_url_mode(record):
            # A URL card is ephemeral: only a click's `response_url` changes it.
            card = self.card(record)
            if note is not None and card["blocks"]:
                card["blocks"][-1] = {"type": "section", "text": {"type": "mrkdwn", "text": note}}
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )
        if self.home_changed is not None:
            self.home_changed([record])

    async def replace_clicked(self, interaction_id: str, response_url: str) -> None:
        """Show the card as its record now stands (answered, or whoever answered first) in place
        of the message clicked, through the click's `response_url`: the way to change an
        ephemeral card, which `chat.update` cannot find."""
        record = await self.store.get_interaction(interaction_id)
        if record is None:
            return
        card = self.card(record)
        if not await self.chat.replace_clicked(response_url, card["text"], blocks=card["blocks"]):
            log.warning("could not replace the card of interaction %s", interaction_id)

    async def note_stopped(self, parent_id: str, calls: Sequence[StoppedCall], user: str) -> None:
        """Under each approved card of `parent_id` whose call a stop cut short, a line saying
        what became of it, so the card never reads as if the tool simply ran."""
        outcome = {call.tool_call_id: call.outcome for call in calls}
        for record in await self.store.run_interactions(parent_id):
            said = outcome.get(str(record.payload.get("tool_call_id", "")))
            if said is None or record.status != "answered" or not record.message_ts:
                continue
            line = {
                "ran": "it ran before the stop",
                "interrupted": "it was interrupted while it ran and may or may not have "
                "taken effect",
                "not_started": "it was stopped before it ran and did not run",
            }[said]
            card = self.card(record)
            card["blocks"].append(
                {
                    "type": "context",
                    "elements": [
                        {
                            "type": "mrkdwn",
                            "text": f":octagonal_sign: Stopped by {mention(user)}: {line}.",
                        }
                    ],
                }
            )
            await self.chat.update(
                record.channel, record.message_ts, card["text"], blocks=card["blocks"]
            )

    async def close_for_stop(
        self, run_id: str, *, user: str, reason: str, answered_too: bool = False
    ) -> list[InteractionRecord]:
        """Close the run's pending requests as stopped, and their cards; with `answered_too`
        (the stop claimed the run, so no answer of it will run) the cards of answered ones say
        so too. Returns the records whose cards now say stopped."""
        closed = []
        for record in await self.store.run_interactions(run_id):
            if record.status == "answered" and answered_too:
                shown: InteractionRecord | None = record
            elif record.status != "pending":
                continue
            else:
                claim = await self.store.close_interaction(
                    record.interaction_id, status="cancelled", now=self.clock()
                )
                shown = claim.record if claim.won else None
            if shown is None:
                continue
            closed.append(shown)
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
            await self.show_closed(shown, note=_stopped_note(shown, reason))
        return closed


def _expiry(payload: dict[str, Any], default: float) -> float:
    """When the request expires: the app's default, or sooner when what it asks for lives
    less long (an MCP server's `requestState`, `expires_at` in the payload)."""
    stated = payload.get("expires_at")
    if isinstance(stated, int | float) and not isinstance(stated, bool) and stated < default:
        return float(stated)
    return default


def _stopped_note(record: InteractionRecord, reason: str) -> str:
    """The line of a card its stop closed: for an approval, that its tool did not run (nothing
    resumes the request now, answered or not)."""
    if not is_approval(record):
        return f":octagonal_sign: This request was {reason}."
    name = str(record.payload.get("tool", "the tool")).replace("`", "")[:100]
    tool = f"`{blocks.escape(name)}`"
    return f":octagonal_sign: This request was {reason} before {tool} ran: it did not run."
