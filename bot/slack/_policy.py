"""Who may answer which interaction: approver lists, user groups, per-tool rules, self-approval.

Questions are open to anyone in the channel unless `HANDBACK_ANSWERERS` narrows them; approvals
follow the list the tool's `Approval` names, else the tool's own list in
`HANDBACK_TOOL_APPROVERS`, else `HANDBACK_APPROVERS`. With no list at all nobody may approve
(gates fail closed); the list `anyone` (`blocks.ANYONE`) lets anyone in the channel approve,
except that the person who asked may not approve their own request (they may always deny it:
withdrawing a request is never a risk). A user group that cannot be
read grants nothing, and the person is told why.

Everyone who shaped the turn that asks for an approval counts as a requester of it
(`InteractionRecord.requesters`): whoever sent a message of that turn and whoever answered one
of its questions or denied one of its approvals (a plain Approve steers nothing and does not
count). Otherwise an approver could answer someone else's question with "please
deploy" and then approve the deploy alone. `HANDBACK_ALLOW_SELF_APPROVAL` relaxes the rule only
for the person whose message started the run that asks (`requester`), which is what the setting
says, and never for a rule that needs several approvers; the others are refused whatever it says.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import assert_never

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from blocks import ANYONE

# Used only by the Slack app's internals, kept out of `blocks.__all__` (not for users).
from blocks._text import mention
from state import CorruptRecordError, InteractionRecord, approval_of, is_approval, kind_of

# Used only by the Slack app's internals, kept out of `state.__all__` (not for users).
from state._approval_answer import approves

from .._errors import HandbackError

__all__ = [
    "FRESH_WITHIN",
    "AnswerPolicy",
    "GroupLookupFailed",
    "GroupMembers",
    "fresh_group_members",
    "is_member",
    "read_once",
    "slack_group_members",
]

log = logging.getLogger("handback.slack")

GroupMembers = Callable[[str], Awaitable[frozenset[str]]]
"""User-group id -> its members' user ids; raises `GroupLookupFailed` when it cannot tell."""


class GroupLookupFailed(HandbackError):
    """Slack would not list a user group's members; the message says which group and why."""


FRESH_WITHIN = 2.0
"""Seconds a user group's member list read for a claim or a resume stays fresh."""


def slack_group_members(client: AsyncWebClient, *, ttl: float = 60.0) -> GroupMembers:
    """Members of a user group from `usergroups.users.list`, cached for `ttl` seconds: what a
    click is checked against first."""
    return _group_reader(client, within=ttl, clock=time.monotonic)


def fresh_group_members(
    client: AsyncWebClient,
    *,
    within: float = FRESH_WITHIN,
    clock: Callable[[], float] = time.time,
) -> GroupMembers:
    """Members of a user group as Slack listed them at most `within` seconds ago (by `clock`),
    never from the click cache: what a claim and a resume check approvals against, since someone
    may have left the group since they clicked."""
    return _group_reader(client, within=within, clock=clock)


def _group_reader(
    client: AsyncWebClient, *, within: float, clock: Callable[[], float]
) -> GroupMembers:
    """Member lists read at most `within` seconds ago. Lookups of one group that overlap share
    one call, and a list read lately serves the next: `usergroups.users.list` is rate limited
    (Slack's tier 2, about 20 a minute), so a burst of approvals must ask about once per group,
    not once per click, or most of them wait minutes behind the client's rate-limit retries. A
    failed lookup is not kept."""
    reads: dict[str, tuple[float, asyncio.Future[frozenset[str]]]] = {}

    async def members(group_id: str) -> frozenset[str]:
        now = clock()
        kept = reads.get(group_id)
        if kept is not None:
            started, read = kept
            failed = read.done() and (read.cancelled() or read.exception() is not None)
            if now - started <= within and not failed:
                return await asyncio.shield(read)
        read = asyncio.ensure_future(_list_members(client, group_id))
        # Retrieved here: a failure whose callers were all cancelled is not logged as lost.
        read.add_done_callback(lambda done: done.cancelled() or done.exception())
        reads[group_id] = (now, read)
        return await asyncio.shield(read)

    return members


def read_once(members: GroupMembers) -> GroupMembers:
    """`members`, each group read at most once through the result (a failure is not kept): one
    check of several approvals against fresh membership asks Slack once per group."""
    seen: dict[str, frozenset[str]] = {}

    async def once(group_id: str) -> frozenset[str]:
        if group_id not in seen:
            seen[group_id] = await members(group_id)
        return seen[group_id]

    return once


async def _list_members(client: AsyncWebClient, group_id: str) -> frozenset[str]:
    try:
        response = await client.usergroups_users_list(usergroup=group_id)
    except SlackApiError as error:
        reason = str(error.response.get("error") or "an error")
        log.warning("cannot list user group %s: %s", group_id, reason)
        raise GroupLookupFailed(f"Slack said `{reason}`") from None
    except (aiohttp.ClientError, TimeoutError) as error:
        log.warning("cannot list user group %s: %r", group_id, error)
        raise GroupLookupFailed("Slack did not answer") from None
    return frozenset(str(user) for user in response.get("users") or [])


@dataclass(kw_only=True)
class AnswerPolicy:
    """The rules; `refusal()` returns why a person may not answer, or None when they may."""

    approvers: tuple[str, ...] = ()
    """Users (U…/W…) and user groups (S…) who may approve, or `(ANYONE,)`; empty: nobody."""
    tool_approvers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per tool name, replacing `approvers` for that tool."""
    answerers: tuple[str, ...] = ()
    """Who may answer questions; empty means anyone."""
    allow_self_approval: bool = False

    async def refusal(
        self, record: InteractionRecord, user: str, members: GroupMembers, *, denying: bool = False
    ) -> str | None:
        """Why `user` may not answer `record`, or None; `denying` for a Deny on an approval."""
        try:
            match kind_of(record):
                case "approval":
                    return await self._approval_refusal(record, user, members, denying=denying)
                case "elicitation":
                    return await _elicitation_refusal(record, user, members)
                case "confirm" | "ask_user" | "ask_user_multi" | "custom":
                    if self.answerers and not await _is_member(user, self.answerers, members):
                        return "You are not on the list of people who may answer these questions."
                case unreachable:
                    assert_never(unreachable)
        except GroupLookupFailed as error:
            # Failing closed is the only safe reading of a policy that cannot be checked.
            return (
                f"I could not check whether you may answer this: {error}. Please try again, "
                "or ask whoever runs handback if it keeps happening."
            )
        return None

    def approvers_of(self, record: InteractionRecord) -> tuple[str, ...]:
        """Who may approve `record` (empty: nobody; `(ANYONE,)`: anyone): the rule's list when
        it names one, else the tool's list from the environment, else `approvers`; and, once
        the store says the request escalated (`escalated_at`), the rule's `escalate_to` as
        well. Raises `CorruptRecordError` for a rule that does not read back."""
        rule = approval_of(record)
        if rule is not None and rule.approvers:
            allowed = tuple(rule.approvers)
        else:
            tool = str(record.payload.get("tool", ""))
            allowed = self.tool_approvers.get(tool, self.approvers)
        # Before the escalation (or for a record whose rule escalates to nobody) the list stays
        # as it is; `anyone` already lets everyone approve, so adding to it changes nothing.
        if allowed and rule is not None and record.escalated_at is not None:
            allowed += tuple(entry for entry in rule.escalate_to if entry not in allowed)
        return allowed

    async def withdrawals(self, record: InteractionRecord, members: GroupMembers) -> dict[str, str]:
        """Whose approvals in `record` no longer count, each with why (said of them, for the card
        and the audit log); empty when every one still does. Every approval that counts is
        checked: each vote of a rule that needs several (pending or answered), else the approver
        of an answered one. `members` should read user groups fresh: this is the check made
        again just before the run resumes (or a vote completes)."""
        if not is_approval(record):
            return {}
        if record.status == "answered" and approves(record.answer):
            voters = [vote.user for vote in record.votes]
            approvers = voters or ([record.answered_by] if record.answered_by else [])
        elif record.status == "pending":
            approvers = [vote.user for vote in record.votes]
        else:
            return {}  # A denial ends the request whoever gave it; there is nothing to undo.
        members = read_once(members)
        found: dict[str, str] = {}
        for user in approvers:
            reason = await self._no_longer_counts(record, user, members)
            if reason is not None:
                found[user] = reason
        return found

    async def _no_longer_counts(
        self, record: InteractionRecord, user: str, members: GroupMembers
    ) -> str | None:
        try:
            allowed = self.approvers_of(record)
            if not allowed:
                return "no approver rule is set for it"
            if not await _may_approve(user, allowed, members):
                return "no longer on the approvers list"
        except CorruptRecordError:
            return "its approval rule cannot be read"
        except GroupLookupFailed as error:
            # Failing closed: an approval that cannot be checked does not count.
            return f"the approvers list could not be checked ({error})"
        refusal = await self.refusal(record, user, members)
        return None if refusal is None else "no longer allowed to approve it"

    async def _approval_refusal(
        self, record: InteractionRecord, user: str, members: GroupMembers, *, denying: bool
    ) -> str | None:
        tool = str(record.payload.get("tool", ""))
        try:
            rule = approval_of(record)
            allowed = self.approvers_of(record)
        except CorruptRecordError as error:
            log.error("refusing an answer to %s: %s", record.interaction_id, error)
            return "This request's approval rule cannot be read, so nobody can approve it."
        several = rule is not None and rule.count > 1
        if record.requester is not None and record.requester == user:
            if denying:
                return None
            if several:
                return (
                    "You asked for this, and it needs approvers other than whoever asked, "
                    "so someone else has to approve it."
                )
            if not self.allow_self_approval:
                return "You asked for this, so someone else has to approve it."
        elif user in record.requesters:
            if denying:
                return None
            return (
                "You answered a question or sent a message in the conversation that led to "
                "this request, so someone else has to approve it."
            )
        if not allowed:
            log.error("refusing an approval of %s: no approver rule", record.interaction_id)
            return (
                f"Nobody may approve `{tool}` yet: no approver rule is set for it. Whoever runs "
                "handback sets HANDBACK_APPROVERS, HANDBACK_TOOL_APPROVERS or the tool's "
                "Approval(approvers=...)."
            )
        # The list applies to the requester too: `allow_self_approval` only relaxes "not the
        # requester", it never lets someone who is not an approver approve anything.
        if not await _may_approve(user, allowed, members):
            return f"You are not on the list of people who may approve `{tool}`."
        return None


async def _elicitation_refusal(
    record: InteractionRecord, user: str, members: GroupMembers
) -> str | None:
    """An MCP server's question is answered by the person whose request it is, unless the
    server's rule names who may (`MCPServer(answerers=...)`, stored with the question)."""
    allowed = record.payload.get("answerers")
    if isinstance(allowed, list) and allowed:
        if await _may_approve(user, [str(entry) for entry in allowed], members):
            return None
        return "You are not on the list of people who may answer this server's questions."
    if record.requester is None or record.requester == user:
        return None
    return f"Only {mention(record.requester)} may answer this: it is their request."


async def _may_approve(user: str, allowed: Iterable[str], members: GroupMembers) -> bool:
    """Whether the list `allowed` lets `user` approve: `anyone` does; else they must be on it."""
    allowed = tuple(allowed)
    return ANYONE in allowed or await _is_member(user, allowed, members)


async def _is_member(user: str, allowed: Iterable[str], members: GroupMembers) -> bool:
    """Whether `user` is named or in a named group; a group that cannot be read only matters
    when no other entry lets the person in."""
    groups = []
    for entry in allowed:
        if entry == user:
            return True
        if entry.startswith("S"):
            groups.append(entry)
    failures: list[str] = []
    for group in groups:
        try:
            if user in await members(group):
                return True
        except GroupLookupFailed as error:
            failures.append(f"user group `{group}` could not be read ({error})")
    if failures:
        raise GroupLookupFailed("; ".join(failures))
    return False


async def is_member(user: str, allowed: Iterable[str], members: GroupMembers) -> bool:
    """Whether `user` is named in `allowed` or in a user group it names; `GroupLookupFailed`
    when only an unreadable group could have let them in."""
    return await _is_member(user, allowed, members)
