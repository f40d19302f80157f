"""The questions an MCP server asks during a call (the older protocol), in the run's thread: the
card posted while the call waits (`bot.mcp._live`), its answer claimed once in the store by
whichever process takes the click, and, after a restart, its card closed as ended with it.

Such a question resumes no run: the process holding the call reads the answer from the store.
Its record belongs to `live_run_id(run)`, not the run, so the run's own cards and resumes
never wait on it."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import blocks
from state import AuditEntry, InteractionRecord, InteractionStore, PendingInteraction

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import AuditedInteractions

from ..events import InteractionEvent
from ..mcp._elicit import answered_detail
from ..mcp._live import live_run_id
from ._cards import Cards
from ._chat import Chat
from ._turns import Thread

__all__ = ["ThreadQuestions", "answer_live", "end_after_restart"]

log = logging.getLogger("handback.slack")

RESTARTED: Final = (
    ":warning: This question ended when the bot restarted: the server asked it during the "
    "call, which was reported interrupted (it may or may not have taken effect)."
)


class ThreadQuestions:
    """`LiveQuestions` for one turn's thread: each question is a card there (a URL one is the
    requester's alone, as every URL card)."""

    def __init__(
        self,
        *,
        store: AuditedInteractions,
        chat: Chat,
        cards: Cards,
        thread: Thread,
        requesters: Callable[[], list[str]],
    ) -> None:
        self.store = store
        self.chat = chat
        self.cards = cards
        self.thread = thread
        self.requesters = requesters

    async def ask(self, interaction: PendingInteraction, *, run_id: str) -> None:
        live = live_run_id(run_id)
        event = InteractionEvent.of(live, interaction.runnable_path, interaction)
        await self.cards.post(live, [event], self.thread, self.requesters())

    async def completed(self, record: InteractionRecord) -> None:
        # The answer's audit entry ("completed by the server") was written with its claim.
        server = str(record.payload.get("server", "the"))
        text = f"The {blocks.escape(server)} server says this is done: the call goes on."
        await self._note(record, text)

    async def ended(self, interaction_id: str, *, why: str) -> None:
        claim = await self.store.close_interaction(
            interaction_id, status="cancelled", now=self.cards.clock()
        )
        if claim.won and claim.record is not None:
            await self._note(claim.record, f":octagonal_sign: This question ended: {why}.")

    async def _note(self, record: InteractionRecord, text: str) -> None:
        """Say `text` on the card; a URL card is ephemeral (no `chat.update` finds it), so the
        requester is told in the thread instead."""
        if blocks.is_url_mode(record):
            if record.requester:
                await self.chat.ephemeral(
                    record.channel, record.requester, text, thread_ts=record.thread_ts
                )
            return
        await self.cards.show_closed(record, note=text)


async def end_after_restart(
    store: AuditedInteractions, cards: Cards, run_id: str, tool_call_id: str
) -> None:
    """The call `tool_call_id` of `run_id` was reported interrupted after a restart: a question
    it asked during the call can never be answered now, so it is closed and its card says so."""
    for record in await store.run_interactions(live_run_id(run_id)):
        if record.status != "pending" or record.tool_call_id != tool_call_id:
            continue
        claim = await store.close_interaction(
            record.interaction_id, status="cancelled", now=cards.clock()
        )
        if not claim.won or claim.record is None:
            continue
        await store.audit(
            AuditEntry(
                at=cards.clock(),
                action="cancelled",
                interaction_id=record.interaction_id,
                run_id=record.run_id,
                detail="the bot restarted while the call that asked it was open",
            )
        )
        closed = claim.record
        if not closed.message_ts and closed.thread_ts and not blocks.is_url_mode(closed):
            # The process died between posting the card and saving where it went.
            ts = await cards.chat.card_in_thread(
                closed.channel, closed.thread_ts, closed.interaction_id
            )
            closed.message_ts = ts
        if blocks.is_url_mode(claim.record) and claim.record.requester:
            await cards.chat.ephemeral(
                claim.record.channel,
                claim.record.requester,
                RESTARTED,
                thread_ts=claim.record.thread_ts,
            )
        else:
            await cards.show_closed(claim.record, note=RESTARTED)


async def answer_live(
    store: InteractionStore,
    cards: Cards,
    record: InteractionRecord,
    *,
    user: str,
    answer: Any,
    clock: Callable[[], float],
    refuse: Callable[[str], Awaitable[None]],
) -> None:
    """Claim the answer to a question asked during a call (once, in the store, with its audit
    entry) and close its card; the process holding the call takes it from the store. No run is
    claimed or resumed. A lost claim is refused with what became of the question."""
    claim = await store.answer_and_claim(
        record.interaction_id,
        answer=answer,
        answered_by=user,
        now=clock(),
        audit=AuditEntry(
            at=clock(),
            action="answered",
            interaction_id=record.interaction_id,
            run_id=record.run_id,
            user=user,
            detail=answered_detail(record.payload, answer),
        ),
    )
    if claim.won and claim.record is not None:
        await cards.show_closed(claim.record)
        return
    await refuse(_lost_reason(claim.record))


def _lost_reason(record: InteractionRecord | None) -> str:
    if record is None:
        return "handback has no such request."
    if record.status == "answered":
        return "This question was answered already."
    return "This question has ended, so it can no longer be answered."
