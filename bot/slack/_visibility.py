"""Who can see the conversation a request was made in: App Home lists a request, and takes a
click or a modal submission on it, only from someone who can.

Whoever asked can (they were there). Anyone else can see a public channel's request, a private
channel's or group DM's only as a member, and a DM's never ("nobody else can see this
conversation"). The kind of conversation comes from Slack (`conversations.info`), since a
private channel's id starts with C as a public one's does; only a DM is told by its id (Slack
gives every DM a D id, and the bot has no `im:read` to ask). Members come from
`conversations.members`. Both are cached briefly; anything Slack does not answer plainly hides
the request (fail closed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final, Literal, TypeVar

from state import InteractionRecord

from ._agent_surface import is_dm
from ._chat import Chat

__all__ = ["ConversationKind", "Visibility", "kind_of"]

log = logging.getLogger("handback.slack")

ConversationKind = Literal["public", "private", "im", "mpim"]

_KIND_FRESH: Final = 300.0
"""Seconds a channel's kind is reused (a channel made private is seen as such within this)."""
_MEMBERS_FRESH: Final = 30.0
"""Seconds a private conversation's members are reused: someone who left stops seeing its
requests in Home within this, someone who joined starts."""
_FAILURE_FRESH: Final = 5.0
"""Seconds an answer Slack did not give is reused (the request stays hidden meanwhile)."""
_CACHED: Final = 5_000
"""Channels remembered (emptied when full: a miss is one Slack call)."""


def kind_of(info: dict[str, object] | None) -> ConversationKind | None:
    """The kind of conversation `conversations.info` describes; None when it does not say
    plainly (which callers read as "hidden")."""
    if info is None:
        return None
    if info.get("is_im") is True:
        return "im"
    if info.get("is_mpim") is True:
        return "mpim"
    if info.get("is_private") is True or info.get("is_group") is True:
        return "private"
    if info.get("is_channel") is True and info.get("is_private") is False:
        return "public"
    return None


class Visibility:
    """Answers "can this person see this request's conversation?" from Slack, cached."""

    def __init__(self, chat: Chat, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.chat = chat
        self.clock = clock
        self._kinds: dict[str, tuple[float, ConversationKind | None]] = {}
        """Channel -> (when it is to be asked again, its kind)."""
        self._members: dict[str, tuple[float, frozenset[str] | None]] = {}
        """Channel -> (when it is to be asked again, its members)."""

    async def can_see(self, record: InteractionRecord, user: str) -> bool:
        """Whether `user` can see the conversation `record` was made in (see the module
        docstring); False whenever Slack cannot say."""
        if record.requester is not None and record.requester == user:
            return True
        if not record.channel:
            return False
        kind = await self.kind(record.channel)
        match kind:
            case "public":
                return True
            case "im" | None:
                return False
            case "private" | "mpim":
                members = await self.members(record.channel)
                return members is not None and user in members

    async def kind(self, channel: str) -> ConversationKind | None:
        if is_dm(channel):
            return "im"
        cached = self._kinds.get(channel)
        if cached is not None and self.clock() < cached[0]:
            return cached[1]
        kind = kind_of(await self.chat.conversation_info(channel))
        if kind is None:
            log.warning("cannot tell what kind of conversation %s is: hiding its requests", channel)
        fresh = _KIND_FRESH if kind is not None else _FAILURE_FRESH
        _remember(self._kinds, channel, (self.clock() + fresh, kind))
        return kind

    async def members(self, channel: str) -> frozenset[str] | None:
        cached = self._members.get(channel)
        if cached is not None and self.clock() < cached[0]:
            return cached[1]
        members = await self.chat.conversation_members(channel)
        fresh = _MEMBERS_FRESH if members is not None else _FAILURE_FRESH
        _remember(self._members, channel, (self.clock() + fresh, members))
        return members


_T = TypeVar("_T")


def _remember(cache: dict[str, _T], key: str, value: _T) -> None:
    if len(cache) >= _CACHED:
        cache.clear()
    cache[key] = value
