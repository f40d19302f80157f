"""`suspend()` and `current_call()`: what a tool handler can ask of the run it runs in.

A handler runs inside a `HandlerScope` that knows the answers accepted so far. `suspend()` derives
the interaction id deterministically, returns the answer when there is one, and otherwise raises
`Suspended`, a `BaseException`, so that a tool's `except Exception:` cannot swallow the pause.
`current_call()` names the call being executed, with a key that stays the same when the same run
is retried, for tools that pass it on to an external API.
"""

from __future__ import annotations

import hashlib
import json
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import PydanticSerializationError, to_jsonable_python

from state import NestedRun, PendingInteraction, RunStore

from ._channels import ChannelTools
from ._errors import UsageError
from ._schema import check_schema

__all__ = [
    "CallContext",
    "Cancel",
    "Cancelled",
    "HandlerScope",
    "Suspended",
    "as_json_payload",
    "current_call",
    "interaction_id",
    "suspend",
]


@dataclass(frozen=True)
class Cancel:
    """An answer that ends the paused run `cancelled / cancelled`; no handler ever sees it."""

    reason: str = "cancelled"


class Suspended(BaseException):
    """Raised by `suspend()` when no answer is available yet; by an agent used as a tool when
    its run paused, with every interaction it waits for and that run (`nested`)."""

    def __init__(self, *interactions: PendingInteraction, nested: NestedRun | None = None) -> None:
        super().__init__(*(i.interaction_id for i in interactions))
        self.interactions = list(interactions)
        self.nested = nested


class Cancelled(BaseException):
    """Raised by `suspend()` when the answer is a `Cancel`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _canonical(payload: dict[str, Any]) -> str:
    # sort_keys so that dict order never changes an id; default=str keeps exotic values hashable
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)


def as_json_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """`payload` as JSON data (datetimes as text, tuples as lists, models as dicts).

    The payload is stored and shown to people; normalizing it here makes the emitted event equal
    to what the store gives back, and turns an unstorable value into an error in the handler
    instead of a run that cannot be saved.
    """
    try:
        data = to_jsonable_python(payload)
    except PydanticSerializationError as exc:
        raise UsageError(f"suspend() payload must be JSON data: {exc}") from None
    assert isinstance(data, dict)
    return data


def interaction_id(
    path: str,
    payload: dict[str, Any],
    tool_call_id: str | None,
    index: int,
    *,
    root_id: str | None = None,
) -> str:
    """A stable id from the conversation, handler path, payload, tool call and occurrence index.

    `root_id` None is scheme 1, the ids of runs saved before the conversation was hashed in; some
    model servers send `call_0` in every conversation, so without it two threads making the same
    call would share an id.
    """
    return _interaction_id(path, _canonical(payload), tool_call_id, index, root_id)


def _interaction_id(
    path: str, canonical: str, tool_call_id: str | None, index: int, root_id: str | None
) -> str:
    material = f"{path}\x1f{canonical}\x1f{tool_call_id or ''}\x1f{index}"
    if root_id is not None:
        material = f"{root_id}\x1f{material}"
    return "int_" + hashlib.sha256(material.encode()).hexdigest()[:32]


@dataclass(frozen=True, kw_only=True)
class CallContext:
    """The tool call a handler is executing, as `current_call()` returns it."""

    run_id: str
    """The run executing the call (a retried run keeps its caller-chosen id)."""
    tool_call_id: str
    tool: str
    """The tool's name."""
    idempotency_key: str
    """`run_id` and `tool_call_id`: the same on every retry of the same run, distinct for every
    other call, so an external API can deduplicate on it."""


@dataclass(kw_only=True)
class HandlerScope:
    """What `suspend()` needs to know about the handler execution it is called from."""

    path: str
    name: str
    tool_call_id: str | None
    answers: dict[str, Any]
    run_id: str = ""
    root_id: str | None = None
    """Hashed into interaction ids (scheme 2); None for a run saved with scheme 1."""
    store: RunStore | None = None
    """The store of the run: an agent used as a tool saves its own runs there."""
    nested: NestedRun | None = None
    """For a call whose tool is an agent: the inner run the call paused on last time."""
    input_required: dict[str, Any] | None = None
    """For a call to an MCP server: the input-required result (JSON) it paused on last time,
    which the handler sends the retry from; the handler replaces it with the next round's, and
    the run keeps it while the call waits (`RunRecord.input_required`)."""
    channel: str | None = None
    """The channel of the run: an agent the handler runs as a tool runs there too."""
    within: tuple[ChannelTools, ...] = ()
    """The tool sets that bound such an agent: its callers' (see `bot/_nested.py`)."""
    occurrences: dict[str, int] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)
    """Answer ids this execution consumed; a run that pauses again must keep them."""

    def suspend(
        self,
        payload: dict[str, Any],
        kind: str,
        response_schema: dict[str, Any] | None,
        *,
        unhashed: dict[str, Any] | None = None,
    ) -> Any:
        """The answer, or `Suspended`. `unhashed` joins the payload without entering the id:
        what describes the tool rather than the call (its argument schema) may change with a
        deploy, and the id of a paused interaction must not."""
        payload = as_json_payload(payload)
        canonical = _canonical(payload)
        index = self.occurrences.get(canonical, 0)
        self.occurrences[canonical] = index + 1
        iid = _interaction_id(self.path, canonical, self.tool_call_id, index, self.root_id)
        if iid in self.answers:
            answer = self.answers[iid]
            if isinstance(answer, Cancel):
                raise Cancelled(answer.reason)
            self.used.append(iid)
            return answer
        check_schema(response_schema)
        if unhashed:
            payload = {**payload, **as_json_payload(unhashed)}
        raise Suspended(
            PendingInteraction(
                interaction_id=iid,
                kind=kind,
                payload=payload,
                response_schema=response_schema,
                tool_call_id=self.tool_call_id,
                runnable_path=self.path,
                runnable_name=self.name,
                runnable_type="Tool",
                t0=int(time.time() * 1000),
            )
        )


current_scope: ContextVar[HandlerScope | None] = ContextVar("handback_scope", default=None)


def suspend(
    payload: dict[str, Any],
    *,
    kind: str = "suspend",
    response_schema: dict[str, Any] | None = None,
) -> Any:
    """Pause the run until a person answers; on resume, return the (validated) answer.

    The handler re-executes from the top on resume, so call this before any side effect that
    must not happen twice.
    """
    scope = current_scope.get()
    if scope is None:
        raise UsageError("suspend() was called outside a tool handler of a running agent")
    if not isinstance(payload, dict):
        raise UsageError(f"suspend() takes a dict payload, got {type(payload).__name__}")
    return scope.suspend(payload, kind, response_schema)


def current_call() -> CallContext:
    """The tool call the calling handler executes (also in the thread a sync handler runs in,
    and in threads a handler starts with `asyncio.to_thread`, which copies the context);
    `UsageError` outside a handler."""
    scope = current_scope.get()
    if scope is None or scope.tool_call_id is None:
        raise UsageError("current_call() was called outside a tool handler of a running agent")
    return CallContext(
        run_id=scope.run_id,
        tool_call_id=scope.tool_call_id,
        tool=scope.name,
        idempotency_key=f"{scope.run_id}:{scope.tool_call_id}",
    )
