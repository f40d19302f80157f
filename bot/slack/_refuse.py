"""Telling a person their answer was not taken: the refusal is audited, then shown to them
(ephemeral in the channel, on their App Home view, or in their DM with the app), and someone
who cannot see the request's conversation is told only `NOT_YOURS`."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from state import AuditEntry, AuditLog, InteractionRecord

from .. import _metrics
from ._chat import Chat
from ._home import Home
from ._refusal import NOT_YOURS
from ._visibility import Visibility

__all__ = ["Refuser", "user_and_channel"]

log = logging.getLogger("handback.slack")


class Refuser:
    """Audits refusals and tells the person refused."""

    def __init__(
        self,
        *,
        store: AuditLog,
        chat: Chat,
        visibility: Visibility,
        home: Home | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.visibility = visibility
        self.home = home
        self.clock = clock

    async def told(self, reason: str, user: str, record: InteractionRecord | None) -> str:
        """What to tell `user` of a refusal: the reason, or `NOT_YOURS` when they cannot see
        the request's conversation (the reason may name its tool or who answered it)."""
        if record is None or reason == NOT_YOURS or not user:
            return reason
        return reason if await self.visibility.can_see(record, user) else NOT_YOURS

    async def audit(
        self,
        *,
        user: str,
        reason: str,
        interaction_id: str | None,
        run_id: str | None,
        record: InteractionRecord | None,
    ) -> str:
        """Count and audit the refusal; what `user` is to be told of it (`told`)."""
        _metrics.answer_refused(reason)
        told = await self.told(reason, user, record)
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
        return told

    async def refuse(
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
        told = await self.audit(
            user=user, reason=reason, interaction_id=interaction_id, run_id=run_id, record=record
        )
        outsider = told != reason
        if home and self.home is not None:
            await self.home.publish(user, notice=told)
        elif channel and await self.chat.ephemeral(channel, user, told, thread_ts=thread_ts):
            pass
        elif outsider and user:
            # Slack refuses an ephemeral message to someone who is not in the channel: they
            # are told in their DM with the app instead (it names nothing of the request).
            await self.chat.post(user, told)
        else:
            log.info("refused %s for %s: %s", interaction_id, user, told)


def user_and_channel(body: Any) -> tuple[str, str | None]:
    """`(user id, channel id)` of a payload that may not have parsed, for telling the person;
    empty or None where the payload does not say (or says it with the wrong type)."""

    def field_id(key: str) -> str | None:
        value = body.get(key) if isinstance(body, dict) else None
        found = value.get("id") if isinstance(value, dict) else None
        return found if isinstance(found, str) and found else None

    return field_id("user") or "", field_id("channel")
