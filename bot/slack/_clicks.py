"""A click on a card or in App Home (a `block_actions` work item, after the ack): parsed into a
`CardAction`, taken (`Take`), and then a page of options drawn, a form opened, a grant revoked,
or the answer it stands for claimed (`Claims`). Every refusal is told (`Refuser`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import blocks
from blocks import CardAction, InvalidAnswer
from state import InteractionRecord

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import ClickStore

from ._chat import Chat
from ._claim import Claims
from ._conversation import Conversations
from ._grants import revoke_grant
from ._home import Home
from ._refusal import Refusal
from ._refuse import Refuser, user_and_channel
from ._take import ELSEWHERE, Take
from ._worker import Work

__all__ = ["Clicks"]

_DENY_ACTIONS = frozenset({blocks.ACTION_DENY, blocks.ACTION_DENY_REASON})
"""Controls whose only possible answer is a Deny."""


class Clicks:
    """Handles `block_actions` payloads."""

    def __init__(
        self,
        *,
        store: ClickStore,
        chat: Chat,
        conversations: Conversations,
        take: Take,
        claims: Claims,
        refuser: Refuser,
        home: Home | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.chat = chat
        self.conversations = conversations
        self.take = take
        self.claims = claims
        self.refuser = refuser
        self.home = home
        self.clock = clock

    async def on_action(self, body: dict[str, Any], *, work: Work | None = None) -> None:
        """Handle one `block_actions` payload (after the ack); `work` is its inbox item."""
        try:
            action = blocks.parse_block_action(body)
        except InvalidAnswer as error:
            user, channel = user_and_channel(body)
            await self.refuser.refuse(
                user=user, channel=channel, thread_ts=None, reason=str(error), interaction_id=None
            )
            return
        if action.intent == "selection":
            return  # Ticking options only changes the card's state; Submit reads it.
        record: InteractionRecord | None = None
        try:
            if action.action == blocks.ACTION_REVOKE:
                await self._revoke(action)
                return
            if action.channel_id is None and action.origin != "home":
                # A card is always in a channel, and Slack says which (the payload's channel or
                # its container); a click that does not cannot be checked against the card's.
                # Only a click Slack says was made in App Home has none (`origin`).
                raise Refusal(ELSEWHERE)
            record = await self.take.pending(
                action.interaction_id,
                action.user_id,
                channel=action.channel_id,
                denying=action.action in _DENY_ACTIONS,
                work=work,
            )
            await self._check_where(record, action, work)
            await self._act(record, action, work)
        except (Refusal, InvalidAnswer) as error:
            if isinstance(error, Refusal) and error.record is not None:
                record = error.record
            await self.refuser.refuse(
                user=action.user_id,
                channel=action.channel_id,
                thread_ts=action.thread_ts,
                reason=str(error),
                interaction_id=action.interaction_id,
                run_id=record.run_id if record else None,
                home=action.origin == "home",
                record=record,
            )
        if record is not None and blocks.is_url_mode(record) and action.response_url:
            # An ephemeral card: its click's URL is the one way to show how it stands now.
            await self.conversations.cards.replace_clicked(
                record.interaction_id, action.response_url
            )

    async def _check_where(
        self, record: InteractionRecord, action: CardAction, work: Work | None
    ) -> None:
        """The checks of where the person clicked (their Home, or a card), and the card's place
        saved when a crash lost it."""
        if action.origin == "home":
            await self.take.check_home(record, action.user_id, work)
        else:
            await self.take.check_card(record, action.user_id, work)
        if not record.message_ts and action.message_ts and record.channel:
            # A crash between posting the card and saving where it went leaves no ts; the
            # click comes from the card itself, so it says where the card is.
            await self.store.set_message(
                record.interaction_id, channel=record.channel, message_ts=action.message_ts
            )
            record.message_ts = action.message_ts

    async def _act(self, record: InteractionRecord, action: CardAction, work: Work | None) -> None:
        """What a click that passed its checks does, by its intent."""
        in_home = action.origin == "home"
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
            await self.claims.accept(
                record, user=action.user_id, answer=answer, work=work, home=in_home
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

    async def _show_page(self, record: InteractionRecord, action: CardAction) -> None:
        page = blocks.page_from_action(record, action)
        if not (record.channel and record.message_ts):
            return
        cards = self.conversations.cards
        card = cards.card(record, page=page)
        await self.chat.update(
            record.channel, record.message_ts, card["text"], blocks=card["blocks"]
        )
        # Someone may have answered while this page was drawn; their card update can land before
        # this one, which would bring the buttons back. Show the stored state if it moved on.
        now = await self.store.get_interaction(record.interaction_id)
        if now is not None and now.status != "pending":
            card = cards.card(now)
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
