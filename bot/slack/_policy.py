"""Who may answer which interaction: approver lists, user groups, per-tool rules, self-approval.

Questions are open to anyone in the channel unless `HANDBACK_ANSWERERS` narrows them; approvals
follow `HANDBACK_APPROVERS`, or the tool's own list in `HANDBACK_TOOL_APPROVERS`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from state import InteractionRecord

__all__ = ["AnswerPolicy", "GroupMembers", "slack_group_members"]

log = logging.getLogger("handback.slack")

GroupMembers = Callable[[str], Awaitable[frozenset[str]]]
"""User-group id -> its members' user ids."""


def slack_group_members(client: AsyncWebClient, *, ttl: float = 60.0) -> GroupMembers:
    """Members of a user group from `usergroups.users.list`, cached for `ttl` seconds."""
    cache: dict[str, tuple[float, frozenset[str]]] = {}

    async def members(group_id: str) -> frozenset[str]:
        hit = cache.get(group_id)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1]
        try:
            response = await client.usergroups_users_list(usergroup=group_id)
        except SlackApiError as error:
            # An unknown group grants nothing; failing closed is the safe reading of a policy.
            log.warning("cannot list user group %s: %s", group_id, error.response.get("error"))
            return frozenset()
        found = frozenset(str(user) for user in response.get("users") or [])
        cache[group_id] = (time.monotonic() + ttl, found)
        return found

    return members


@dataclass(kw_only=True)
class AnswerPolicy:
    """The rules; `refusal()` returns why a person may not answer, or None when they may."""

    approvers: tuple[str, ...] = ()
    """Users (U…/W…) and user groups (S…) who may approve; empty means anyone."""
    tool_approvers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Per tool name, replacing `approvers` for that tool."""
    answerers: tuple[str, ...] = ()
    """Who may answer questions; empty means anyone."""
    allow_self_approval: bool = False

    async def refusal(
        self, record: InteractionRecord, user: str, members: GroupMembers
    ) -> str | None:
        if record.kind == "approval":
            tool = str(record.payload.get("tool", ""))
            if not self.allow_self_approval and record.requester == user:
                return "You asked for this, so someone else has to approve it."
            allowed = self.tool_approvers.get(tool, self.approvers)
            if allowed and not await _is_member(user, allowed, members):
                return f"You are not on the list of people who may approve `{tool}`."
            return None
        if self.answerers and not await _is_member(user, self.answerers, members):
            return "You are not on the list of people who may answer these questions."
        return None


async def _is_member(user: str, allowed: Iterable[str], members: GroupMembers) -> bool:
    groups = []
    for entry in allowed:
        if entry == user:
            return True
        if entry.startswith("S"):
            groups.append(entry)
    for group in groups:
        if user in await members(group):
            return True
    return False
