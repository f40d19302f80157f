"""`eager_task`: a coroutine begun now, its first synchronous segment run before this returns.

A task made with `loop.create_task` takes its first step on a later turn of the loop. The journal
marks a call "started" and then starts it in the same callback as the store's reply; if the
handler's first line ran only a turn later, a process killed in between would leave a call
marked started that never began, and a retry would tell people it "may or may not have taken
effect". Python 3.12's `eager_start` does this for a Task, but CI runs 3.11: here the coroutine
is stepped once in its context, and the rest is handed to a Task through `_Stepped`, an
awaitable that forwards `send`/`throw` to it. One code path on every version, tested on 3.11.

As in a 3.12 eager task, `asyncio.current_task()` in the first segment is the new task.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any, Literal, TypeVar

__all__ = ["eager_task"]

_T = TypeVar("_T")


def eager_task(coro: Coroutine[Any, Any, _T], context: contextvars.Context) -> asyncio.Task[_T]:
    """`coro` run in `context` up to its first real suspension now, then on as a Task.

    What the first segment returns or raises (the pause `Suspended` included) is the task's
    result; the handler's work is over when this returns, though the task settles on the
    loop's next turn, as every Task does. A task cancelled before it takes its first
    step closes the coroutine at the point where it waits, so its `finally` blocks run then and
    not whenever the garbage collector gets to it.
    """
    loop = asyncio.get_running_loop()
    stepped = _Stepped(coro)
    task: asyncio.Task[_T] = loop.create_task(stepped, context=context)
    # The first step runs as the new task, as 3.12's eager start does: anyio's cancel scopes
    # (the MCP client's) and `asyncio.timeout()` belong to the task that enters them, and must
    # be left by the same one. asyncio's own hooks for that are private but stable since 3.7.
    outer = asyncio.current_task()
    if outer is not None:
        asyncio.tasks._leave_task(loop, outer)
    asyncio.tasks._enter_task(loop, task)
    try:
        stepped.first = context.run(_first_step, coro)
    finally:
        asyncio.tasks._leave_task(loop, task)
        if outer is not None:
            asyncio.tasks._enter_task(loop, outer)
    return task


_Outcome = tuple[Literal["yielded", "returned", "raised"], Any]


def _first_step(coro: Coroutine[Any, Any, Any]) -> _Outcome:
    try:
        return ("yielded", coro.send(None))
    except StopIteration as stop:
        return ("returned", stop.value)
    except BaseException as exc:  # a BaseException too: `Suspended`, a cancellation
        return ("raised", exc)


class _Stepped(Coroutine[Any, Any, Any]):
    """The rest of a coroutine that took its first step outside the task that now runs it.

    The task's first `send(None)` gets back what the coroutine yielded then (the future it
    waits on); every later `send`/`throw` goes to the coroutine itself, whose `StopIteration`
    is the task's result. The Task drives this object directly, not an `async def` around it:
    a coroutine not yet begun takes a `throw` (the cancellation) without running its body, so
    the wrapped coroutine would never hear of it.
    """

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro
        self.first: _Outcome | None = None
        """What the first step did, until the task has been told."""

    def __await__(self) -> Generator[Any, Any, Any]:
        return self  # a generator in all but name: nothing but the Task drives it

    def __iter__(self) -> _Stepped:
        return self

    def __next__(self) -> Any:
        return self.send(None)

    def send(self, value: Any) -> Any:
        first, self.first = self.first, None
        if first is None:
            return self._coro.send(value)
        kind, what = first
        if kind == "yielded":
            return what
        if kind == "returned":
            raise StopIteration(what)
        raise what

    def throw(self, typ: Any, val: Any = None, tb: Any = None, /) -> Any:
        # A Task throws an instance; the (type, value, traceback) form is read the same way.
        exc: BaseException = (
            typ if isinstance(typ, BaseException) else typ(*([] if val is None else [val]))
        )
        first, self.first = self.first, None
        if first is not None:
            # Cancelled before the task's first step: the task never learnt of the future the
            # coroutine waits on, so nobody else would cancel it or end the coroutine.
            kind, what = first
            if kind == "yielded" and isinstance(what, asyncio.Future):
                what.cancel()
            self._coro.close()
            raise exc
        return self._coro.throw(exc)

    def close(self) -> None:
        self._coro.close()
