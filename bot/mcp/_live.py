"""A question a server asks during the call (the older protocol's `elicitation/create`), served
while the call is open in the process that made it.

The question becomes an interaction like any (stored, a card), marked `legacy`: the call waits
in this process, so the card says it cannot outlive a restart. The answer is recorded in the
store like any click, by whichever process takes the click, and claimed there once; the process
holding the call reads it back from the store (a poll with a bounded wait: the answer is durable
first, so the poll's timing decides only how soon it is seen). After a restart the call is
reported interrupted by the journal and the Slack app closes the card (`live_run_id`).

A URL question names an elicitation id on this protocol: the server's
`notifications/elicitation/complete` for it answers it (accept) in the store, claimed once like
a click, so a click and the server racing give one answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import uuid
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, assert_never
from urllib.parse import urlsplit

from mcp_types import (
    INVALID_REQUEST,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
)

from blocks import ELICITATION
from state import AuditEntry, InteractionRecord, PendingInteraction

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import AuditedInteractions

from .._errors import UsageError
from .._schema import check_schema
from .._suspend import HandlerScope
from ._elicit import (
    Unanswerable,
    answer_schema,
    answered_detail,
    as_result,
    is_https,
    read_held,
)

__all__ = [
    "POLL",
    "Completions",
    "LiveQuestions",
    "OpenCall",
    "live_questions",
    "live_run_id",
    "refused_links",
    "refused_note",
    "serve_question",
]

log = logging.getLogger("handback.mcp")

POLL: Final = 0.25
"""Seconds between two reads of a waiting question's record (a bounded wait, not a deadline)."""

_SERVER_USER: Final = "mcp-server:"
"""`answered_by` of a URL question the server said was completed (followed by its name)."""


def live_run_id(run_id: str) -> str:
    """The run the records of `run_id`'s questions asked during a call belong to: not the run
    itself, whose answers resume it (a question asked during a call resumes nothing)."""
    return f"{run_id}:live"


class LiveQuestions(Protocol):
    """Where the questions of a run's open calls are shown (the Slack app's thread)."""

    store: AuditedInteractions

    async def ask(self, interaction: PendingInteraction, *, run_id: str) -> None:
        """Store the question (under `live_run_id(run_id)`) and post its card."""

    async def completed(self, record: InteractionRecord) -> None:
        """The server said the URL question is done: tell the person (its card is theirs)."""

    async def ended(self, interaction_id: str, *, why: str) -> None:
        """The call ended without an answer (stopped, shut down): close the question if still
        pending, and say `why` on its card."""


live_questions: ContextVar[LiveQuestions | None] = ContextVar(
    "handback_live_questions", default=None
)
"""Set by whoever drives a run (the Slack app, around each turn): calls started in it find it."""


@dataclass(kw_only=True)
class OpenCall:
    """A call open on a server, as its questions need it: whose run, where to ask."""

    server: str
    tool: str
    scope: HandlerScope | None
    questions: LiveQuestions | None
    answerers: tuple[str, ...] = ()
    refused: list[str] = field(default_factory=list)
    """Links the server asked the person to open that were declined unasked (not https)."""
    closed: bool = False
    """The call returned or was cancelled (the SDK's callback runs in the session's task, not
    the call's, so it is not cancelled with the call: it looks here)."""


@dataclass
class Completions:
    """The elicitation ids a server said were completed; `wait` wakes a question's waiter."""

    done: set[str] = field(default_factory=set)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def complete(self, elicitation_id: str) -> None:
        self.done.add(elicitation_id)
        self._changed.set()

    async def wait(self, seconds: float) -> None:
        """Until a completion arrives or `seconds` passed."""
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._changed.wait()


def _refused(message: str) -> ErrorData:
    return ErrorData(code=INVALID_REQUEST, message=message)


async def serve_question(
    call: OpenCall | None, params: ElicitRequestParams, completions: Completions
) -> ElicitResult | ErrorData:
    """Ask the question on a card and wait for its answer in the store; the server gets accept
    (with the content), decline or cancel. Fails closed: with no call to ask for (or no place to
    ask), the question is refused and the server's tool goes on without an answer."""
    if call is None or call.scope is None or call.questions is None:
        return _refused("handback cannot ask this question: no open call of a conversation")
    scope, questions = call.scope, call.questions
    try:
        interaction = _interaction(call, scope, params)
    except UsageError as exc:
        return _refused(f"handback cannot show this question: {exc}")
    if interaction is None:
        assert isinstance(params, ElicitRequestURLParams)
        call.refused.append(params.url)
        return ElicitResult(action="decline")  # a URL that is not https: never offered
    iid = interaction.interaction_id
    elicitation_id = interaction.payload.get("elicitation_id")
    await questions.ask(interaction, run_id=scope.run_id)
    try:
        while True:
            if call.closed:
                await questions.ended(iid, why="the call it was asked for ended")
                return ElicitResult(action="cancel")
            record = await questions.store.get_interaction(iid)
            if record is None or record.status not in ("pending", "answered"):
                return ElicitResult(action="cancel")  # expired, closed, stopped
            if record.status == "answered":
                return as_result(record.answer)
            if isinstance(elicitation_id, str) and elicitation_id in completions.done:
                now = time.time()
                claim = await questions.store.answer_and_claim(
                    iid,
                    answer={"action": "accept"},
                    answered_by=_SERVER_USER + call.server,
                    now=now,
                    audit=AuditEntry(
                        at=now,
                        action="answered",
                        interaction_id=iid,
                        run_id=live_run_id(scope.run_id),
                        user=_SERVER_USER + call.server,
                        detail=answered_detail(
                            interaction.payload, {"action": "accept"}, by_server=True
                        ),
                    ),
                )
                if claim.won and claim.record is not None:
                    completions.done.discard(elicitation_id)
                    await questions.completed(claim.record)
                    return ElicitResult(action="accept")
                continue  # a click came first: its answer, read again
            await completions.wait(POLL)
    except Unanswerable:
        return ElicitResult(action="cancel")
    except asyncio.CancelledError:
        # The server withdrew the question (its tool was cancelled: the call was stopped) or
        # the session is closing: the card must not stay answerable. The SDK's cancel scope
        # cancels every further await here, so the closing runs as a task of its own.
        closing = asyncio.get_running_loop().create_task(
            questions.ended(iid, why="the call it was asked for ended")
        )
        _CLOSING.add(closing)
        closing.add_done_callback(_closed)
        raise


_CLOSING: set[asyncio.Task[None]] = set()
"""Closings started by cancelled waiters, held until done (the loop keeps only weak refs)."""


def _closed(task: asyncio.Task[None]) -> None:
    _CLOSING.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not close a question asked during a call: %r", task.exception())


def _interaction(
    call: OpenCall, scope: HandlerScope, params: ElicitRequestParams
) -> PendingInteraction | None:
    base: dict[str, Any] = {
        "server": call.server,
        "tool": call.tool,
        "request": "in-call",
        "legacy": True,
        "message": params.message,
    }
    match params:
        case ElicitRequestFormParams():
            requested = dict(params.requested_schema)
            payload = {**base, "mode": "form", "schema": requested}
            schema = answer_schema("form", requested)
        case ElicitRequestURLParams():
            if not is_https(params.url):
                return None
            payload = {
                **base,
                "mode": "url",
                "url": params.url,
                "host": urlsplit(params.url).hostname or "",
                "elicitation_id": params.elicitation_id,
            }
            schema = answer_schema("url")
        case _:
            assert_never(params)
    check_schema(schema)
    if call.answerers:
        payload["answerers"] = list(call.answerers)
    # Never asked again (it cannot outlive the call), so the id only has to be new.
    material = f"{scope.run_id}\x1f{scope.tool_call_id}\x1f{uuid.uuid4().hex}"
    return PendingInteraction(
        interaction_id="int_" + hashlib.sha256(material.encode()).hexdigest()[:32],
        kind=ELICITATION,
        payload=payload,
        response_schema=schema,
        tool_call_id=scope.tool_call_id,
        runnable_path=scope.path,
        runnable_name=scope.name,
        runnable_type="Tool",
        t0=int(time.time() * 1000),
    )


def refused_links(held: dict[str, Any] | None) -> list[str]:
    """The links of a stored input-required round that are declined unasked (not https)."""
    if held is None:
        return []
    try:
        result = read_held(held)
    except Unanswerable:
        return []
    return [
        request.params.url
        for _, request in sorted((result.input_requests or {}).items())
        if isinstance(request, ElicitRequest)
        and isinstance(request.params, ElicitRequestURLParams)
        and not is_https(request.params.url)
    ]


def refused_note(server: str, links: list[str]) -> str:
    """What the model reads before the result of a call whose server asked to open a link
    handback did not offer (the server heard "decline")."""
    if not links:
        return ""
    shown = ", ".join(json.dumps(link[:200]) for link in links)
    return (
        f"(handback declined the {server} server's request to open {shown}: only https links "
        "are offered to people.) "
    )
