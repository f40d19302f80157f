"""Standing grants in Slack: recorded when an approver clicks "Approve for this thread", used
when a later call of that tool there would post a card, revoked by people.

A grant is given with an answer (`{"approved": true, "grant": "thread"}`): the answer is claimed
first, then the grant is added under an id derived from the interaction, so a work item retried
after a crash adds the same grant once. A grant is used only through the store's
`answer_under_grant`, which checks it is still active in the same atomic step as the answer; the
run then resumes through the settled-run recovery (a `recover` work item), exactly as after a
crash between an answer and its resume.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

import blocks
from state import (
    AuditEntry,
    CorruptRecordError,
    Grant,
    GrantClaim,
    GrantScope,
    InteractionRecord,
    Store,
    approval_of,
    grant_id_for,
)

from ._chat import Chat
from ._policy import AnswerPolicy, GroupMembers

__all__ = ["Grants", "given_scope", "revoke_grant", "used_grant"]

log = logging.getLogger("handback.slack")


def given_scope(record: InteractionRecord) -> GrantScope | None:
    """The grant an answered approval gave with it (the card's grant buttons), if any."""
    answer = record.answer
    if (
        record.kind != "approval"
        or not isinstance(answer, dict)
        or answer.get("approved") is not True
    ):
        return None
    scope = answer.get("grant")
    if scope == "thread":
        return "thread"
    if scope == "channel":
        return "channel"
    return None


def used_grant(record: InteractionRecord) -> str | None:
    """The id of the grant an approval was answered under (`Grants.answer`), if it was."""
    answer = record.answer
    if record.kind != "approval" or record.status != "answered" or not isinstance(answer, dict):
        return None
    grant_id = answer.get("grant")
    return grant_id if isinstance(grant_id, str) and grant_id.startswith("grant_") else None


def _iso(unix: float) -> str:
    try:
        return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "an unknown date"


def _where(grant: Grant) -> str:
    return grant.channel if grant.thread_ts is None else f"{grant.channel}/{grant.thread_ts}"


async def revoke_grant(store: Store, grant_id: str, *, by: str, now: float) -> GrantClaim:
    """Revoke a grant for `by` (a Slack user id, or an operator's name), audited when it wins;
    the claim says whether it was active (`won`) and what the grant is (None: unknown)."""
    entry = AuditEntry(
        at=now, action="revoked", user=by, detail=f"revoked standing grant {grant_id}"
    )
    return await store.revoke_grant(grant_id, by=by, now=now, audit=entry)


class Grants:
    """Gives and uses standing grants for the Slack app."""

    def __init__(
        self,
        *,
        store: Store,
        chat: Chat,
        policy: AnswerPolicy | None,
        members: GroupMembers | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.policy = policy
        self.members = members
        self.clock = clock

    async def give(self, record: InteractionRecord) -> Grant | None:
        """Record the grant an answered approval carries (idempotent: a retry adds nothing
        new); None when it carries none or its rule cannot be read."""
        scope = given_scope(record)
        if scope is None or record.answered_by is None or record.answered_at is None:
            return None
        try:
            rule = approval_of(record)
        except CorruptRecordError:
            # The click was refused by the same check already; nothing to grant.
            log.error("not granting on %s: its rule cannot be read", record.interaction_id)
            return None
        if rule is None or rule.count != 1 or scope not in rule.grants:
            return None
        grant = Grant(
            grant_id=grant_id_for(record.interaction_id),
            tool=str(record.payload.get("tool", "")),
            scope=scope,
            channel=record.channel,
            thread_ts=record.thread_ts if scope == "thread" else None,
            granted_by=record.answered_by,
            created_at=record.answered_at,
            expires_at=record.answered_at + rule.grant_ttl,
            interaction_id=record.interaction_id,
            run_id=record.run_id,
        )
        entry = AuditEntry(
            at=record.answered_at,
            action="granted",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            user=record.answered_by,
            detail=(
                f"standing grant {grant.grant_id}: `{grant.tool}` in {_where(grant)} "
                f"({scope}) until {_iso(grant.expires_at)}"
            ),
        )
        try:
            await self.store.add_grant(grant, audit=entry)
        except ValueError:
            # A grant the store refuses (a developer mistake) must not undo the approval, whose
            # run may already be claimed for its resume: the approval stands, without a grant.
            log.exception("could not record the grant given on %s", record.interaction_id)
            return None
        return grant

    async def answer(self, record: InteractionRecord) -> InteractionRecord | None:
        """Approve a new approval under a grant that covers it, and say so in the thread; the
        answered record, or None when no usable grant covers it (a card is needed).

        A grant is usable while its rule still offers that scope to one approver, and only if
        the person who gave it may approve this very request now: on the approvers list, and
        not anyone who shaped the turn that asks (four eyes hold under grants too).
        """
        if record.kind != "approval" or not record.channel or record.status != "pending":
            return None
        try:
            rule = approval_of(record)
        except CorruptRecordError:
            return None
        if rule is None or rule.count != 1 or not rule.grants:
            return None
        tool = str(record.payload.get("tool", ""))
        now = self.clock()
        try:
            covering = await self.store.covering_grants(
                tool, channel=record.channel, thread_ts=record.thread_ts, now=now
            )
        except CorruptRecordError:
            # An unreadable grant approves nothing; the card asks people instead.
            log.exception("cannot read the grants for %s; posting its card", record.interaction_id)
            return None
        for grant in covering:
            if grant.scope not in rule.grants or not await self._may_approve(record, grant):
                continue
            claim = await self.store.answer_under_grant(
                record.interaction_id,
                grant_id=grant.grant_id,
                answer={"approved": True, "grant": grant.grant_id},
                answered_by=grant.granted_by,
                now=now,
                audit=AuditEntry(
                    at=now,
                    action="answered",
                    interaction_id=record.interaction_id,
                    run_id=record.run_id,
                    user=grant.granted_by,
                    detail=(
                        f"approved `{tool}` under standing grant {grant.grant_id} "
                        f"({grant.scope}, until {_iso(grant.expires_at)})"
                    ),
                ),
            )
            if claim.won and claim.record is not None:
                await self.chat.post(
                    record.channel,
                    blocks.grant_used_notice(grant, tool),
                    thread_ts=record.thread_ts,
                )
                return claim.record
            if claim.record is None or claim.record.status != "pending":
                return None  # Answered or closed meanwhile: nothing to do here.
            # The grant ended between the look-up and the answer: try the next one.
        return None

    async def _may_approve(self, record: InteractionRecord, grant: Grant) -> bool:
        user = grant.granted_by
        if self.policy is None or self.members is None:
            return False  # Nobody to ask whether the grant still holds: fail closed.
        if user == record.requester or user in record.requesters:
            log.info(
                "not using grant %s on %s: its giver shaped the turn",
                grant.grant_id,
                record.interaction_id,
            )
            return False
        refusal = await self.policy.refusal(record, user, self.members)
        if refusal is not None:
            log.info("not using grant %s on %s: %s", grant.grant_id, record.interaction_id, refusal)
            return False
        return True
