"""Background work started after an ack: kept referenced, logged on failure, drainable in tests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["Background"]

log = logging.getLogger("handback.slack")


class Background:
    """The tasks the app started after acknowledging Slack.

    asyncio keeps only weak references to tasks, so a task nobody holds can vanish mid-run; this
    holds them until they finish. `drain()` is the "run until idle" entry point for tests.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        if self._closed:
            work.close()
            raise RuntimeError("the app is shutting down; no new work is accepted")
        task = asyncio.create_task(self._guard(work, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _guard(work: Coroutine[Any, Any, Any], name: str) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            # The work reports to people itself; anything that still escapes is a bug to log.
            log.exception("background task %s failed", name)

    @property
    def busy(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait until no task is left, including tasks that finishing tasks started."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def aclose(self) -> None:
        """Let running work finish (a resume half done would be lost), then refuse new work."""
        self._closed = True
        await self.drain()
