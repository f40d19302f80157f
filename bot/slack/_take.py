"""Taking a click (or a modal's answer, or a thread reply): the stored interaction it refers to
is looked up and checked, first by a pure decision on the record (`look_up`), then by the
answer policy and by who can see the request, before anything is claimed."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, assert_never

from state import InteractionRecord, InteractionStore

from .. import _logging
from ._chat import Chat
from ._earlier import own_earlier_answer, own_earlier_vote
from ._home import NOT_IN_HOME, Home
from ._policy import AnswerPolicy, GroupMembers
from ._refusal import NOT_YOURS, Refusal
from ._visibility import Visibility
from ._worker import Work

__all__ = ["ELSEWHERE", "Expire", "Look", "LookKind", "Take", "closed_reason", "look_up"]

Expire = Callable[[InteractionRecord], Awaitable[None]]

ELSEWHERE = "This control does not belong to a request in this channel."

_MISSING = "handback has no such request; this control cannot be used."
_EXPIRED = "This request expired, so it can no longer be answered."

LookKind = Literal["missing", "elsewhere", "expired", "retry", "closed", "open"]
"""What the stored record says of an answer to it: nothing to answer (`missing`), a control
from another channel (`elsewhere`), past its deadline but not swept yet (`expired`), this work
item's own earlier claim or vote (`retry`), answered or closed already (`closed`), or open to
the policy's check (`open`)."""


@dataclass(frozen=True, kw_only=True)
class Look:
    """`look_up`'s decision."""

    kind: LookKind
    reason: str = ""
    """What the person is told, for `missing`, `elsewhere`, `expired` and `closed`."""


def look_up(
    record: InteractionRecord | None,
    *,
    user: str,
    channel: str | None,
    now: float,
    work: Work | None,
) -> Look:
    """Decide from the stored record alone whether an answer by `user`, given in `channel`
    (None for a modal, which has none), may go on to the policy's check."""
    if record is None:
        return Look(kind="missing", reason=_MISSING)
    if channel is not None and channel != record.channel:
        return Look(kind="elsewhere", reason=ELSEWHERE)
    if record.status == "pending" and record.expires_at <= now:
        return Look(kind="expired", reason=_EXPIRED)
    if own_earlier_answer(record, user, work) or own_earlier_vote(record, user, work):
        return Look(kind="retry")
    if record.status != "pending":
        return Look(kind="closed", reason=closed_reason(record))
    return Look(kind="open")


class Take:
    """The checks an answer passes before it is claimed; each failure is a `Refusal`."""

    def __init__(
        self,
        *,
        store: InteractionStore,
        chat: Chat,
        policy: AnswerPolicy,
        members: GroupMembers,
        expire: Expire,
        visibility: Visibility,
        home: Home | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.policy = policy
        self.members = members
        self.expire = expire
        self.visibility = visibility
        self.home = home
        self.clock = clock

    async def pending(
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
        (or voted) and died. That is returned too, so the claim can finish the work.
        """
        _logging.bind(interaction_id=interaction_id)
        read, record = (False, None) if work is None else work.read_with_item(interaction_id)
        if not read:
            record = await self.store.get_interaction(interaction_id)
        look = look_up(record, user=user, channel=channel, now=self.clock(), work=work)
        match look.kind:
            case "missing" | "elsewhere":
                raise Refusal(look.reason)
            case "expired":
                assert record is not None
                # The sweeper has not got to it yet; expire it now (in the background).
                await self.expire(record)
                raise Refusal(look.reason, record=record)
            case "closed":
                raise Refusal(look.reason, record=record)
            case "retry":
                assert record is not None
                return record
            case "open":
                assert record is not None
                refusal = await self.policy.refusal(record, user, self.members, denying=denying)
                if refusal is not None:
                    raise Refusal(refusal, record=record)
                return record
            case unreachable:
                assert_never(unreachable)

    async def check_modal(
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

    async def check_home(self, record: InteractionRecord, user: str, work: Work | None) -> None:
        """A click in App Home is taken only for a request Home would list for this person
        (`Home.refusal`), on top of the card's checks; a retry of their own claim goes on."""
        if own_earlier_answer(record, user, work) or own_earlier_vote(record, user, work):
            return
        refusal = NOT_IN_HOME if self.home is None else await self.home.refusal(record, user)
        if refusal is not None:
            raise Refusal(refusal)

    async def check_card(self, record: InteractionRecord, user: str, work: Work | None) -> None:
        """A click on a card is taken only from someone who can see the conversation it is in
        (`Visibility`, as for Home and modals): a forged click on a DM's or a private channel's
        request by someone outside it is refused. Run by the worker before the claim, never on
        the ack path; for a public channel it is one cached `conversations.info`. Fails closed."""
        if own_earlier_answer(record, user, work) or own_earlier_vote(record, user, work):
            return
        if not await self.visibility.can_see(record, user):
            raise Refusal(NOT_YOURS, record=record)


def closed_reason(record: InteractionRecord) -> str:
    """What someone answering a request that is no longer open is told."""
    match record.status:
        case "answered":
            who = f"<@{record.answered_by}>" if record.answered_by else "someone"
            return f"This was already answered by {who}."
        case "expired":
            return _EXPIRED
        case "superseded":
            return "This request was closed because the conversation moved on."
        case "cancelled":
            return "This request was cancelled."
        case "pending":
            return _EXPIRED
        case unreachable:
            assert_never(unreachable)
