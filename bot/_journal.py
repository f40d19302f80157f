"""The tool journal: what a run records while its handlers run, so that a retry never redoes it.

Before a handler with side effects runs, the run is saved `running` with its transcript (the
assistant message holding the calls included: a retry must not ask the model again, it would get
other calls) and the ids of the calls that start: that "started" mark is the last thing before
the handlers are called (`Journal.save(then=...)`), so a call marked started did begin, give or
take the hand-off to its thread (an async handler runs up to its first await in that same
callback, `bot._eager`). As each call returns, its result is saved.
A run continued from such a record keeps the saved results, reports a call that started and never
returned as interrupted (unless its tool is idempotent: then it runs again), and runs the others.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from state import HandbackError, RunRecord, RunStore, StopGuard

__all__ = [
    "INTERRUPTED_BY_CRASH",
    "INTERRUPTED_BY_STOP",
    "STOP_SAVE_TIMEOUT",
    "Journal",
    "StartRefused",
    "closing_results",
    "tool_message",
]

log = logging.getLogger("handback.agent")

INTERRUPTED_BY_CRASH = (
    "Interrupted: the process stopped while this ran; it may or may not have taken effect."
)
"""The result of a call that started in a process that died before its result was saved."""

INTERRUPTED_BY_STOP = "Interrupted: the run was stopped."
"""The result of every open call of a run whose task was cancelled."""

STOP_SAVE_TIMEOUT = 5.0
"""Seconds a cancelled run waits for its last save: whoever cancelled it is waiting too, and a
store that does not answer in that time will not answer the next save either."""


class StartRefused(HandbackError):
    """The store refused the journal's started mark: the run's turn was stopped since it began
    (`save_run(stop=...)`), so its handlers were not started. The run ends as stopped."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"Run `{run_id}` was stopped before its tools started")
        self.run_id = run_id


class Journal:
    """Writes one run to the store while its tool calls execute.

    Writes are serialized: on Redis two concurrent writes may travel on two connections and land
    out of order, an older record last. A write that started finishes even when the task that
    asked for it is cancelled (it is shielded), and the next write waits for it, so the record a
    cancelled run saves last is the one that stays.
    """

    def __init__(self, store: RunStore, run: RunRecord) -> None:
        self._store = store
        self._run = run
        self._lock = asyncio.Lock()
        self._inflight: asyncio.Future[None] | None = None

    @property
    def store(self) -> RunStore:
        return self._store

    async def save(
        self, then: Callable[[], None] | None = None, *, stop: StopGuard | None = None
    ) -> bool:
        """Write the run as it is now (one round trip); then, if given, call `then()`.

        With `stop` the store writes nothing once the run's turn was stopped (`save_run`):
        False then, and `then` is not called. True when written.

        `then` is the store's own `then` (`RunStore.save_run`): called where the store learns
        that the write is durable, so nothing else of this process (no Slack call, no other
        store call, no wait for another turn of a busy loop) comes between the write and what
        `then` starts. The journal's "started"
        mark is written so, just before the handlers are started. When the caller is cancelled
        before the write returns, the write still finishes but `then` is not called.
        """
        wanted = True
        written = [False]

        def after(saved: bool) -> None:
            written[0] = saved
            if saved and wanted and then is not None:
                then()

        async with self._lock:
            if self._inflight is not None and not self._inflight.done():
                # Left behind by a caller that was cancelled while it waited.
                await asyncio.wait([self._inflight])
            write = asyncio.ensure_future(self._write(after, stop, wants_then=then is not None))
            write.add_done_callback(_log_failure)
            self._inflight = write
            try:
                await asyncio.shield(write)
            except asyncio.CancelledError:
                wanted = False
                raise
        return written[0]

    async def _write(
        self, after: Callable[[bool], None], stop: StopGuard | None, *, wants_then: bool
    ) -> None:
        # `after(True)` is the store's `then`: called where the store learns the write is
        # durable (right after a commit made, or a Redis reply read, on the loop's thread), not
        # a loop turn later when this task would wake (issue 19).
        called = False

        def durable() -> None:
            nonlocal called
            called = True
            after(True)

        saved = await self._store.save_run(
            self._run, stop=stop, then=durable if wants_then else None
        )
        if not called:
            after(saved)

    async def save_stopped(self) -> None:
        """The last save of a run whose task was cancelled: bounded by `STOP_SAVE_TIMEOUT`.

        The cancellation that stopped the run was already delivered, so awaiting here is not cut
        short by it; the caller re-raises it afterwards (no `uncancel()`: whoever cancelled the
        task, a `TaskGroup` or `asyncio.timeout`, must still see it). A second cancellation, or
        the timeout, abandons the wait but not the write.
        """
        try:
            async with asyncio.timeout(STOP_SAVE_TIMEOUT):
                await self.save()
        except TimeoutError:
            log.error(
                "run %s: the store did not save the stopped run within %ss",
                self._run.run_id,
                STOP_SAVE_TIMEOUT,
            )
        except asyncio.CancelledError:
            log.warning("run %s: cancelled again while saving the stopped run", self._run.run_id)
        except Exception:
            log.exception("run %s: saving the stopped run failed", self._run.run_id)


def _log_failure(write: asyncio.Future[None]) -> None:
    # A shielded write whose caller went away is awaited by nobody: say what became of it.
    if not write.cancelled() and write.exception() is not None:
        log.error("journal write failed: %r", write.exception())


def closing_results(run: RunRecord, *, started: str, not_started: str) -> list[dict[str, Any]]:
    """Tool messages that close every pending call of `run`, in call order: its saved result,
    else `started` or `not_started`, whether its handler started or not."""
    messages = []
    for call in run.pending_calls:
        result = run.results.get(call.tool_call_id)
        if result is None:
            result = started if call.tool_call_id in run.started else not_started
        messages.append(tool_message(call.tool_call_id, result))
    return messages


def tool_message(tool_call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tool_call_id, "content": content}
