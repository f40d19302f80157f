"""Which open call a question asked during a call is for (`OpenCalls`), as a value: only a
call that had its session alone from start to finish gets one; a call that ended unanswered
keeps every call opened before the server answered a later one from getting one."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, REQUEST_TIMEOUT

# Private: the rule is a value of the connection with no public door; the end-to-end cases
# are in test_mcp_legacy_questions.py, the edges here
from bot.mcp._live import OpenCall
from bot.mcp._open_calls import OpenCalls


def _call(tool: str) -> OpenCall:
    return OpenCall(server="legacy", tool=tool, scope=None, questions=None)


def test_a_call_alone_from_start_to_finish_owns_the_question() -> None:
    calls, first = OpenCalls(), _call("first")
    assert calls.owner() is None
    with calls.opened(first):
        assert calls.owner() is first
    assert first.closed and calls.owner() is None


def test_a_call_that_shared_its_session_never_owns_a_question_again() -> None:
    calls, first, second = OpenCalls(), _call("first"), _call("second")
    with calls.opened(second):
        with calls.opened(first):
            assert calls.owner() is None
        assert calls.owner() is None  # alone now, but not all along
    with calls.opened(third := _call("third")):
        assert calls.owner() is third  # the others were answered: nothing of theirs is due


@pytest.mark.parametrize("ending", ["cancelled", "timed out"])
def test_a_call_ended_unanswered_keeps_the_next_call_from_a_question(ending: str) -> None:
    calls, stopped = OpenCalls(), _call("stopped")
    with contextlib.suppress(asyncio.CancelledError, MCPError), calls.opened(stopped):
        if ending == "cancelled":
            raise asyncio.CancelledError
        raise MCPError(code=REQUEST_TIMEOUT, message="timed out")
    with calls.opened(_call("following")):
        assert calls.owner() is None  # the stopped call's question may still arrive
    with calls.opened(alone := _call("alone")):
        assert calls.owner() is alone  # a later call was answered: nothing of it is due


def test_an_error_the_server_sent_is_its_answer() -> None:
    calls = OpenCalls()
    with contextlib.suppress(MCPError), calls.opened(_call("refused")):
        raise MCPError(code=INVALID_PARAMS, message="no such tool")
    with calls.opened(following := _call("following")):
        assert calls.owner() is following
