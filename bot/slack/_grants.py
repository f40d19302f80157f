"""Standing grants in Slack: recorded when an approver clicks "Approve for this thread", used
when a later call of that tool there would post a card, revoked by people.

A grant is given with an answer (`{"approved": true, "grant": "thread"}`): the answer is claimed
first, then the grant is added under an id derived from the interaction, so a work item retried
after a crash adds the same grant once. It is bound to what was approved (`Grant.mismatch`): the
tool's path in the agent tree, the thread or channel, whose requests, the pinned arguments. A
grant is used only through the store's `answer_under_grant`, which checks it is still active in
the same atomic step as the answer, and only while its giver may approve that very request (user
groups read fresh, as the resume's re-check reads them, so the thread is never told a call runs
under a grant the re-check then withdraws); the run then resumes through the settled-run recovery
(a `recover` work item), exactly as after a crash between an answer and its resume.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

# Used only by the Slack app's internals, kept out of `blocks.__all__` (not for users).
from blocks._grant import grant_used_notice
from state import (
    AuditEntry,
    CorruptRecordError,
    Grant,
    GrantScope,
    GrantStore,
    InteractionRecord,
    approval_of,
    is_approval,
    used_grant,
)

# Coordination records of the Slack app and the id it derives a grant's from, kept out of
# `state.__all__` (not for users).
from state._grant import GrantClaim, grant_id_for

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import GrantWork

from .._redact import REDACTED, redact
from ._chat import Chat
from ._policy import AnswerPolicy, GroupMembers
from ._stops import stop_guard

__all__ = ["Grants", "given_scope", "revoke_grant", "used_grant"]
# `used_grant` lives in `state` (App Home's rendering reads it too); re-exported for the app.

log = logging.getLogger("handback.slack")


def given_scope(record: InteractionRecord) -> GrantScope | None:
    """The grant an answered approval gave with it (the card's grant buttons), if any."""
    answer = record.answer
    if (
        not is_approval(record)
        or not isinstance(answer, dict)
        or answer.get("approved") is not True
        or answer.get("arguments") is not None
    ):
        # An edited call is not the call the grant would be bound to: no grant with edits.
        return None
    scope = answer.get("grant")
    if scope == "thread":
        return "thread"
    if scope == "channel":
        return "channel"
    return None


def _iso(unix: float) -> str:
    try:
        return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "an unknown date"


def _where(grant: Grant) -> str:
    return grant.channel if grant.thread_ts is None else f"{grant.channel}/{grant.thread_ts}"


def _shown_arguments(record: InteractionRecord) -> str:
    """The call's arguments for the audit log, secret-looking values masked (the payload holds
    them redacted by the tool's own list already; this masks by key once more)."""
    arguments = record.payload.get("arguments")
    text = json.dumps(redact(arguments), sort_keys=True, default=str)
    return text if len(text) <= 500 else text[:500] + "…"


def _pinned(record: InteractionRecord, names: Sequence[str]) -> dict[str, Any] | None:
    """The values of the arguments a grant pins, from the approved call; None when one is
    missing or shown redacted (a grant cannot be bound to a value nobody saw)."""
    arguments = record.payload.get("arguments")
    if not names:
        return {}
    if not isinstance(arguments, dict):
        return None
    found = {}
    for name in names:
        if (
            name not in arguments
            or arguments[name] == REDACTED
            or redact({name: arguments[name]}) != {name: arguments[name]}
        ):
            return None
        found[name] = arguments[name]
    return found


async def revoke_grant(store: GrantStore, grant_id: str, *, by: str, now: float) -> GrantClaim:
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
        store: GrantWork,
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
        pinned = _pinned(record, rule.grant_arguments)
        if not record.runnable_path or record.requester is None or pinned is None:
            # Nothing to bind it to: a grant that could cover more than was approved is none.
            log.error(
                "not granting on %s: no tool path, requester or pinned argument to bind it to",
                record.interaction_id,
            )
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
            path=record.runnable_path,
            requesters=tuple(dict.fromkeys([record.requester, *rule.grant_requesters])),
            arguments=pinned,
        )
        entry = AuditEntry(
            at=record.answered_at,
            action="granted",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            user=record.answered_by,
            detail=(
                f"standing grant {grant.grant_id}: `{grant.tool}` ({grant.path}) in "
                f"{_where(grant)} ({scope}) for requests by {', '.join(grant.requesters)}"
                + (f" with {json.dumps(pinned, sort_keys=True)}" if pinned else "")
                + f" until {_iso(grant.expires_at)}"
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
        if not is_approval(record) or not record.channel or record.status != "pending":
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
            why = await self._unusable(record, grant, rule.grants)
            if why is not None:
                await self._not_used(record, grant, why, now)
                continue
            claim = await self.store.answer_under_grant(
                record.interaction_id,
                grant_id=grant.grant_id,
                answer={"approved": True, "grant": grant.grant_id},
                answered_by=grant.granted_by,
                now=now,
                audit=self._use(record, grant, now),
                stop=stop_guard(record),
            )
            if claim.stopped is not None:
                # The turn that asks was stopped since: no grant resumes it (the stop closes the
                # request in the thread's turn order).
                return None
            if claim.won and claim.record is not None:
                await self.chat.post(
                    record.channel,
                    grant_used_notice(grant, tool),
                    thread_ts=record.thread_ts,
                )
                return claim.record
            if claim.record is None or claim.record.status != "pending":
                return None  # Answered or closed meanwhile: nothing to do here.
            # The grant ended between the look-up and the answer: try the next one.
        return None

    def _use(self, record: InteractionRecord, grant: Grant, now: float) -> AuditEntry:
        """The audit entry of a call approved under `grant`: whose request, what arguments
        (redacted), which grant and who gave it."""
        tool = str(record.payload.get("tool", ""))
        return AuditEntry(
            at=now,
            action="answered",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            user=grant.granted_by,
            detail=(
                f"approved `{tool}` ({record.runnable_path}) requested by {record.requester} "
                f"with arguments {_shown_arguments(record)} under standing grant "
                f"{grant.grant_id} given by {grant.granted_by} "
                f"({grant.scope}, until {_iso(grant.expires_at)})"
            ),
        )

    async def _not_used(
        self, record: InteractionRecord, grant: Grant, why: str, now: float
    ) -> None:
        """Audit a grant found where a request is asked that does not approve it (the card asks
        people instead): whose request, which grant, given by whom, and why not."""
        log.info("not using grant %s on %s: %s", grant.grant_id, record.interaction_id, why)
        await self.store.audit(
            AuditEntry(
                at=now,
                action="refused",
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                user=record.requester,
                detail=(
                    f"standing grant {grant.grant_id} (`{grant.tool}`, given by "
                    f"{grant.granted_by}) not used for `{record.payload.get('tool', '')}` "
                    f"({record.runnable_path}) requested by {record.requester}: {why}; "
                    "its card asks instead"
                ),
            )
        )

    async def _unusable(
        self, record: InteractionRecord, grant: Grant, offered: Sequence[str]
    ) -> str | None:
        """Why `grant` may not approve `record`, or None when it may."""
        if grant.scope not in offered:
            return f"its rule no longer offers {grant.scope} grants"
        why = grant.mismatch(record)
        if why is not None:
            return why
        return await self._giver_refusal(record, grant)

    async def _giver_refusal(self, record: InteractionRecord, grant: Grant) -> str | None:
        """Why the grant's giver may not approve `record` now, or None when they may: on the
        approvers list (user groups read fresh) and not anyone who shaped the turn."""
        user = grant.granted_by
        if self.policy is None or self.members is None:
            return "nobody can check whether its giver may approve"  # fail closed
        if user == record.requester or user in record.requesters:
            return "its giver shaped the turn that asks"
        refusal = await self.policy.refusal(record, user, self.members)
        if refusal is not None:
            return f"its giver may not approve this now ({refusal})"
        return None
