"""Group commit for the inbox: the enqueues that arrive together share one write (one SQLite
transaction, one Redis script), and each caller still returns only once its own item is durable.

Slack sends a burst of clicks as a burst of requests, each of which waits for its inbox write
before its ack; one round trip (and one commit) per request made the last ack of a burst wait
for all the others' round trips. Here, items submitted while no write is running are written on
the event loop's next turn, all together; items submitted while a write runs are written in the
next one. A lone item waits for nothing but its own write.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

_I = TypeVar("_I")
_R = TypeVar("_R")


class GroupCommit(Generic[_I, _R]):
    """Batches `submit`ted items into calls of `write`, at most `limit` items a call, one call
    at a time.

    `write(items)` must write all of them or none (a transaction, an atomic script) and return
    one result per item, in order. When it raises, every caller of that batch gets the error,
    so none is told its item is written when it is not.
    """

    def __init__(
        self, write: Callable[[Sequence[_I]], Awaitable[Sequence[_R]]], *, limit: int = 64
    ) -> None:
        self._write = write
        self._limit = limit
        self._waiting: list[tuple[_I, asyncio.Future[_R]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._writing = 0

    @property
    def waiting(self) -> int:
        """Items submitted whose write has not finished: their callers (a burst's acks) wait."""
        return len(self._waiting) + self._writing

    async def submit(self, item: _I) -> _R:
        """`item`'s result, once the write that holds it has finished.

        A caller cancelled before its batch is written takes its item out: it is never written.
        Once the write has started it finishes, as an SQL statement already sent would.
        """
        future: asyncio.Future[_R] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._writer is None:
            # A task, not a write now: the items of requests the loop handles on this turn join.
            self._writer = asyncio.get_running_loop().create_task(self._write_all())
        try:
            return await future
        except asyncio.CancelledError:
            self._waiting = [entry for entry in self._waiting if entry[1] is not future]
            raise

    async def _write_all(self) -> None:
        batch: list[tuple[_I, asyncio.Future[_R]]] = []
        try:
            while self._waiting:
                batch = [entry for entry in self._waiting[: self._limit] if not entry[1].done()]
                del self._waiting[: self._limit]
                if batch:
                    await self._write_batch(batch)
                batch = []
        finally:
            self._writer = None
            # Only when this task itself is cancelled (the loop is closing): nobody is left
            # waiting for a write that will not come.
            for _, future in [*batch, *self._waiting]:
                future.cancel()
            self._waiting = []

    async def _write_batch(self, batch: list[tuple[_I, asyncio.Future[_R]]]) -> None:
        self._writing = len(batch)
        try:
            results = await self._write([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} items got {len(results)} results")
        except Exception as error:
            # The same error for each caller: `write` wrote all or none, so all failed.
            for _, future in batch:
                if not future.done():
                    future.set_exception(error)
            return
        finally:
            self._writing = 0
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
