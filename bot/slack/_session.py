"""One turn of a thread shown as a Slack agent session: its status, the answer streamed as it
is written (coalesced into few calls), and each tool call as a task.

The session status follows the run: `processing` while it works, `suspended` while it waits on
people, `active` once it has answered (or was stopped); it is never left `processing`. Text the
model wrote is escaped (`escape`) before it reaches Slack, as every text we did not write is.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk

from state import ConversationStore, StoreError, is_approval

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._records import ThreadStop

from ..events import InteractionEvent, ToolEvent
from ._agent_surface import SessionStatus
from ._chat import Chat, escape

__all__ = ["FLUSH_CHARS", "FLUSH_SECONDS", "AgentTurn", "mention", "session_title"]

log = logging.getLogger("handback.slack")

FLUSH_CHARS = 1000
"""Text is sent once this much has gathered (or `FLUSH_SECONDS` after the last send): a
5,000-character answer costs about five appends, well inside `chat.appendStream`'s tier."""

FLUSH_SECONDS = 1.0

_PIECE = 8000
"""The most text one call carries; Slack takes 12,000 characters of markdown per call."""

_TITLE = 80
_TASK_OUTPUT = 200

_USER_ID = re.compile(r"[UW][A-Z0-9]{2,30}")


def session_title(text: str) -> str:
    """The session's title: the request, on one line, cut short (escaped: a person wrote it)."""
    line = " ".join(text.split())
    if len(line) > _TITLE:
        line = line[: _TITLE - 1] + "…"
    return escape(line) or "Conversation"


def _short(text: str, limit: int) -> str:
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


def mention(user: str | None) -> str:
    """`<@U…>` for a well-formed user id; a Slack field is still untrusted text."""
    return f"<@{user}>" if user and _USER_ID.fullmatch(user) else "someone"


class AgentTurn:
    """The agent session of one turn in one thread; the streamed reply it writes."""

    def __init__(
        self,
        *,
        chat: Chat,
        store: ConversationStore,
        channel: str,
        thread_ts: str,
        recipient: str | None,
        run_id: str | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.chat = chat
        self.store = store
        self.channel = channel
        self.thread_ts = thread_ts
        self.recipient = recipient
        self.run_id = run_id
        self.clock = clock
        self.ts: str | None = None
        """The streamed message, once started."""
        self.shown = ""
        """Every piece of text this turn streamed (escaped), for the classic fallback."""
        self.quiet = False
        """An earlier attempt of this turn delivered its reply already: show nothing again."""
        self.broken = False
        """The stream could not be started or went away: the reply is posted as a message."""
        self.begun = False
        """Whether the session was set `processing` for this turn."""
        self.working_ts: str | None = None
        """The message a classic turn marks with a reaction while it works (a resume's card)."""
        self.reacted = False
        """Whether this turn fell back to classic and marked `working_ts`."""
        self.stop_before: ThreadStop | None = None
        """The thread's stop mark when the turn began: only another one stops this turn."""
        self._pending: list[Chunk] = []
        self._pending_chars = 0
        self._sent_at = clock()
        self._text_seen = False
        self._ran = False
        """Whether a tool call of this turn ended in its stream (a result worth keeping)."""

    # ------------------------------------------------------------------ status

    async def begin(self, *, title: str | None = None, initiator: str | None = None) -> bool:
        """`processing`; False when Slack refused (the process then shows classic messages)."""
        self.begun = True
        return await self.chat.agent_surface.set_status(
            self.channel, self.thread_ts, "processing", title=title, initiator=initiator
        )

    async def take_over(self) -> None:
        """A retry of this turn: stop the stream an earlier attempt left open (its text will be
        streamed again, whole, so the partial message goes), or, if that stream was finished,
        show nothing twice."""
        if self.run_id is None:
            return
        try:
            earlier = await self.store.run_stream(self.run_id)
        except StoreError:
            log.warning("could not look up the stream of run %s", self.run_id)
            return
        if earlier is None:
            return
        stopped = await self.chat.agent_surface.stop_stream(self.channel, earlier)
        if stopped == "ok":
            await self.chat.delete(self.channel, earlier)
        elif stopped == "not_streaming":
            self.quiet = True

    # ------------------------------------------------------------------ content

    @property
    def streamed_text(self) -> bool:
        """Whether the model's text reached this turn (a replayed run has none)."""
        return self._text_seen

    async def text(self, raw: str) -> None:
        """Text the model wrote: escaped, gathered, sent in few calls."""
        if raw:
            self._text_seen = True
        for start in range(0, len(raw), _PIECE):
            await self.markdown(escape(raw[start : start + _PIECE]))

    async def markdown(self, escaped: str) -> None:
        """Text that is safe to show as it is (escaped, or written by us)."""
        if not escaped or self.quiet:
            return
        self.shown += escaped
        last = self._pending[-1] if self._pending else None
        if isinstance(last, MarkdownTextChunk):
            last.text += escaped
        else:
            self._pending.append(MarkdownTextChunk(text=escaped))
        self._pending_chars += len(escaped)
        if self._pending_chars >= FLUSH_CHARS or self.clock() - self._sent_at >= FLUSH_SECONDS:
            await self.flush()

    async def tool(self, event: ToolEvent) -> None:
        """A tool call starts (`in_progress`) or ends (`complete` / `error`, with its result)."""
        status = {"running": "in_progress", "done": "complete", "failed": "error"}[event.status]
        self._ran = self._ran or event.status != "running"
        output = _short(event.result, _TASK_OUTPUT) if event.result else None
        await self._task(event.tool_call_id, escape(event.name), status, output)

    async def asked(self, event: InteractionEvent, *, granted: bool) -> None:
        """A call paused on a person: its task ends `complete`, saying what became of it in
        words that stay true after the answer (the card is the request; the resumed turn
        shows the call run in its own stream)."""
        tool = _short(str(event.payload.get("tool", "")), _TITLE)
        if not is_approval(event):
            title = "Asked on the card below"
        elif granted:
            title = f"{tool}: approved under a standing grant, no card"
        else:
            title = f"{tool}: approval asked on the card below"
        await self._task(event.tool_call_id or event.interaction_id, title, "complete", None)

    async def _task(self, task_id: str, title: str, status: str, output: str | None) -> None:
        if self.quiet:
            return
        chunk = TaskUpdateChunk(id=task_id, title=title, status=status, output=output)
        self._pending.append(chunk)
        await self.flush()

    async def flush(self) -> None:
        """Send what has gathered: the stream's start, or an append to it."""
        if not self._pending or self.broken or self.quiet:
            return
        chunks, self._pending, self._pending_chars = self._pending, [], 0
        self._sent_at = self.clock()
        if self.ts is None:
            await self._start(chunks)
            return
        appended = await self.chat.agent_surface.append_stream(self.channel, self.ts, chunks)
        if appended == "not_streaming":
            # Stopped (the stop button): what it showed stays, nothing is shown again.
            self.quiet = True
        elif appended == "failed":
            self.broken = True

    async def _start(self, chunks: list[Chunk]) -> None:
        self.ts = await self.chat.agent_surface.start_stream(
            self.channel, self.thread_ts, chunks, recipient=self.recipient
        )
        if self.ts is None:
            self.broken = True
            return
        if self.run_id is not None:
            try:
                await self.store.set_run_stream(self.run_id, self.ts)
            except StoreError:
                # Only a retry after a crash needs it, to stop this stream.
                log.warning("could not remember the stream of run %s", self.run_id)

    # ------------------------------------------------------------------ the end

    async def finish(self, status: SessionStatus) -> bool:
        """Stop the stream with the session's next status; False when the reply never reached
        Slack as a stream (`shown` is then for the caller to post)."""
        if self.quiet or (self.ts is None and not self._pending):
            await self.chat.agent_surface.set_status(self.channel, self.thread_ts, status)
            return True
        if self.ts is None and not self.broken:
            await self._start(self._take())
        if self.ts is None or self.broken:
            await self.chat.agent_surface.set_status(self.channel, self.thread_ts, status)
            return False
        stopped = await self.chat.agent_surface.stop_stream(
            self.channel, self.ts, self._take(), session_status=status
        )
        if stopped != "ok":
            # Stopped by someone else (the stop button stops streams): the status is ours.
            await self.chat.agent_surface.set_status(self.channel, self.thread_ts, status)
        return stopped != "failed"

    async def withdraw(self, status: SessionStatus) -> bool:
        """End a turn whose stream says nothing its cards do not (no text, no tool result:
        only the calls that paused) by removing the stream, so a pending request is one
        message, its card; False (nothing done) when the stream holds more than that."""
        if self.shown or self._ran or self.quiet or self.broken:
            return False
        self._take()
        if self.ts is None:
            await self.chat.agent_surface.set_status(self.channel, self.thread_ts, status)
            return True
        stopped = await self.chat.agent_surface.stop_stream(
            self.channel, self.ts, session_status=status
        )
        if stopped == "failed":
            return False
        if stopped != "ok":  # stopped by someone else: the status is ours to set
            await self.chat.agent_surface.set_status(self.channel, self.thread_ts, status)
        await self.chat.delete(self.channel, self.ts)
        self.ts = None
        return True

    def _take(self) -> list[Chunk]:
        chunks, self._pending, self._pending_chars = self._pending, [], 0
        return chunks
