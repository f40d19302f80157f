"""A wait with a deadline that holds even when a cancellation is lost on its way.

`asyncio.timeout` and `asyncio.wait_for` end a wait by cancelling it once, and then wait for the
cancelled call to end. On Python 3.11 a cancellation that lands inside a store call can be lost
(redis-py's own `asyncio.wait_for` lets the call's result through), and the wait then lasts as
long as the call does, past Slack's 3 s. Here the call is a task of its own and the deadline a
wait on it: at the deadline the caller leaves, whether or not the call heeds its cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["within"]

log = logging.getLogger("handback.slack")

_T = TypeVar("_T")

_left: set[asyncio.Task[Any]] = set()
"""Calls whose caller left at the deadline, held until they end (asyncio keeps only weak
references to tasks)."""


async def within(seconds: float, call: Coroutine[Any, Any, _T]) -> _T:
    """What `call` returns, or `TimeoutError` once `seconds` have passed.

    At the deadline, or when the caller is cancelled, `call` is cancelled and left to end on its
    own: a write may still land after the caller gave up on it (as one whose reply was lost
    may), so what gives up must be safe to retry, as the inbox's writes are.
    """
    task = asyncio.ensure_future(call)
    try:
        await asyncio.wait([task], timeout=seconds)
    finally:
        if not task.done():
            task.cancel()
            _left.add(task)
            task.add_done_callback(_ended)
    if not task.done():
        raise TimeoutError
    return task.result()


def _ended(task: asyncio.Task[Any]) -> None:
    _left.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.info("a call given up at its deadline failed later: %r", task.exception())
