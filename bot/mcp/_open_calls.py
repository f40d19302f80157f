"""Which open call a question asked during a call (the older protocol's `elicitation/create`)
belongs to, as far as the order of messages on one session can tell.

Nothing in the request names the call that asks (over stdio nothing ties it to one), so a
question is served only for a call that had its session alone from start to finish: one that
never overlapped another open call. A call that ended without the server's answer (stopped,
timed out) may still have a question on its way, so it counts as open for every call opened
before the server answered one opened after it: its late question is refused, never shown to
the next call's requester. (A server answers the call only after its questions, so an answer
proves that nothing of an earlier call is still on the way.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from ._live import OpenCall

__all__ = ["OpenCalls"]

_UNANSWERED: Final = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT})
"""The SDK's errors of a call the server did not answer (every other error is its answer)."""


@dataclass(kw_only=True)
class _Entry:
    call: OpenCall
    opened: int
    """The order in which it was opened among this session's calls."""
    overlapped: bool
    """Another call was open (or in doubt) at some time while this one was."""


@dataclass
class OpenCalls:
    """The calls open on one session, whether each ever shared it, and the calls that ended
    unanswered (their questions may still arrive)."""

    _open: list[_Entry] = field(default_factory=list)
    _in_doubt: list[int] = field(default_factory=list)
    """When (in `_count`) each call that ended without the server's answer ended."""
    _count: int = 0

    @contextlib.contextmanager
    def opened(self, call: OpenCall) -> Iterator[None]:
        """While the block runs, `call` is open; the block ending by the server's answer (a
        result, or an error the server sent) clears the calls in doubt that ended before it
        began; ending any other way (cancelled, timed out, cut) leaves `call` in doubt."""
        self._count += 1
        entry = _Entry(call=call, opened=self._count, overlapped=bool(self._open or self._in_doubt))
        for other in self._open:
            other.overlapped = True
        self._open.append(entry)
        answered = False
        try:
            yield
            answered = True
        except MCPError as exc:
            answered = exc.code not in _UNANSWERED
            raise
        finally:
            self._open.remove(entry)
            call.closed = True  # a question still waiting for it ends (`serve_question`)
            self._count += 1
            if answered:
                self._in_doubt = [ended for ended in self._in_doubt if ended > entry.opened]
            else:
                self._in_doubt.append(self._count)

    def owner(self) -> OpenCall | None:
        """The call a question arriving now is for: the only open call, if it never shared the
        session; None when it cannot be told (refuse the question)."""
        if len(self._open) != 1 or self._open[0].overlapped:
            return None
        return self._open[0].call

    def __len__(self) -> int:
        return len(self._open)
