"""A person's command: one tool call made by a person instead of the model (`Agent.call_tool`).

The run looks like one in which the model made the call: the user message is what the person
typed, then an assistant message with the call, so the approval gate, the journal, the pause and
the resume are the ones every call goes through, and a later message in the thread continues a
valid transcript. The run's `input` records the command; a run whose input is a command ends with
the tool's result once its step is done, instead of calling the model.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from state import PendingCall, RunRecord, RunStore

from ._redact import redact

__all__ = ["as_command_input", "command_output", "direct_call", "scrub_command"]


def direct_call(name: str, arguments: dict[str, Any], run_id: str) -> PendingCall:
    """The call, with an id derived from the run: a retry of the run (same id) makes the same
    call, so its approval keeps its interaction id and its journal entry is found again."""
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:24]
    data = to_jsonable_python(arguments, fallback=str)
    return PendingCall(
        tool_call_id=f"cmd_{digest}", name=name, arguments=json.dumps(data, ensure_ascii=False)
    )


def as_command_input(
    run: RunRecord, call: PendingCall, hidden: frozenset[str] = frozenset()
) -> None:
    """Make a new run's one step `call`, as a person typed it (the run's prompt).

    A person may type a secret into a command (`token=...`): the run's `input` and the
    transcript (which the store keeps for the thread, and the model reads later) hold the
    arguments `redact`ed (secret-looking values and the tool's `hidden` ones); only the
    pending call, which the tool is called with, holds what was typed."""
    shown = redact(json.loads(call.arguments), hidden)
    run.input = {"command": run.input, "tool": call.name, "arguments": shown}
    run.transcript.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.tool_call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(shown, ensure_ascii=False),
                    },
                }
            ],
        }
    )
    run.pending_calls = [call]


async def scrub_command(store: RunStore, parent: RunRecord, tools: Mapping[str, Any]) -> None:
    """A person's command that paused (for its approval) kept what they typed in its pending
    call: the tool had to be called with it. Once a child of it has ended the turn nothing needs
    it, so the paused record is saved again with the call's arguments redacted, and no stored
    byte keeps a typed secret. No write when there is nothing to hide (one round trip if so)."""
    if not (isinstance(parent.input, dict) and "command" in parent.input):
        return
    if not parent.transcript_read:
        return  # a claim's copy, without its transcript: never saved
    calls, changed = [], False
    for call in parent.pending_calls:
        tool = tools.get(call.name)
        hidden: frozenset[str] = getattr(tool, "redact", frozenset())
        shown = json.dumps(redact(json.loads(call.arguments), hidden), ensure_ascii=False)
        changed = changed or shown != call.arguments
        calls.append(PendingCall(tool_call_id=call.tool_call_id, name=call.name, arguments=shown))
    if changed:
        parent.pending_calls = calls
        await store.save_run(parent)


def command_output(run: RunRecord) -> str | None:
    """The tool's result when `run` is a command whose call has its result; else None."""
    if not (isinstance(run.input, dict) and "command" in run.input):
        return None
    last = run.transcript[-1] if run.transcript else {}
    if last.get("role") != "tool":
        return None
    return str(last.get("content") or "")
