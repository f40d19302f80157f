"""An MCP server's request for input (elicitation) as handback interactions, and the people's
answers as the server's `inputResponses`.

On the current protocol a `tools/call` may return an input-required result (`inputRequests`
and an opaque `requestState`). The result is kept with the call (`HandlerScope.input_required`,
stored in the run), each elicitation becomes an interaction whose id derives from that stored
request, and the resumed call sends the retry from it: the first round is never asked again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, assert_never
from urllib.parse import urlsplit

from mcp_types import (
    CreateMessageRequest,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    InputResponses,
    ListRootsRequest,
    ListRootsResult,
)
from pydantic import ValidationError

from blocks import ELICITATION

from .._errors import HandbackError
from .._redact import redact
from .._suspend import HandlerScope, Suspended

__all__ = [
    "Unanswerable",
    "answer_schema",
    "answered_detail",
    "held_of",
    "question_suffix",
    "read_held",
    "responses",
]

_ACTIONS: Final = ("accept", "decline", "cancel")

_DETAIL_LIMIT: Final = 500
"""Characters of an answer kept in its audit detail."""

Mode = Literal["form", "url"]


class Unanswerable(HandbackError):
    """The server asked for something handback does not give (sampling an LLM, an unreadable
    request); the call ends with this message as its result."""


def question_suffix(payload: Mapping[str, Any], *, by_server: bool = False) -> str:
    """What the audit says of a server's question after its answer (either protocol): whose
    tool asked it, and, for a URL question the server said was completed, that it did."""
    completed = ": completed by the server" if by_server else ""
    return f" [MCP {payload.get('server')}: question of its tool {payload.get('tool')}{completed}]"


def answered_detail(payload: Mapping[str, Any], answer: Any, *, by_server: bool = False) -> str:
    """The `answered` audit detail of a server's question: the answer, masked as shown (a
    form's field may hold a secret) and cut short, then `question_suffix`."""
    text = json.dumps(redact(answer), default=str)
    if len(text) > _DETAIL_LIMIT:
        text = text[: _DETAIL_LIMIT - 1] + "…"
    return text + question_suffix(payload, by_server=by_server)


def answer_schema(mode: Mode, requested: dict[str, Any] | None = None) -> dict[str, Any]:
    """What an answer to an elicitation looks like: `{"action": "accept", "content": {...}}`
    with the content valid against the server's `requestedSchema`, or `{"action": "decline"}`
    / `{"action": "cancel"}`. URL mode has no content: accept means "done"."""
    match mode:
        case "url":
            return {
                "type": "object",
                "properties": {"action": {"enum": list(_ACTIONS)}},
                "required": ["action"],
                "additionalProperties": False,
            }
        case "form":
            return {
                "anyOf": [
                    {
                        "type": "object",
                        "properties": {"action": {"const": "accept"}, "content": requested or {}},
                        "required": ["action", "content"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {"action": {"enum": ["decline", "cancel"]}},
                        "required": ["action"],
                        "additionalProperties": False,
                    },
                ]
            }
        case _:
            assert_never(mode)


def held_of(
    result: InputRequiredResult, *, lifetime: float | None, sent_at: float
) -> dict[str, Any]:
    """The input-required result as it is stored with the call, with when it expires when the
    server's `requestState` lifetime is known.

    `sent_at` is the wall clock (`time.time()`) when the round that got `result` was sent. The
    server starts the lifetime when it mints the state, somewhere between sending and receipt:
    counted from the send, the expiry is never later than the state's real end (earlier by the
    round's latency at most), where counted from the receipt it would outlive the state by that
    latency, which under load is seconds."""
    held = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    if lifetime is not None:
        held["expiresAt"] = sent_at + lifetime
    return held


def read_held(held: dict[str, Any]) -> InputRequiredResult:
    """The stored input-required result; a record that does not read is `Unanswerable`."""
    try:
        return InputRequiredResult.model_validate(
            {k: v for k, v in held.items() if k != "expiresAt"}
        )
    except ValidationError:
        raise Unanswerable("the stored request of the server cannot be read") from None


@dataclass(kw_only=True, frozen=True)
class _Asked:
    """One input request of the server, as the interaction that asks it."""

    key: str
    payload: dict[str, Any]
    schema: dict[str, Any]
    mode: Mode


def responses(
    held: dict[str, Any],
    scope: HandlerScope,
    *,
    server: str,
    tool: str,
    answerers: tuple[str, ...] = (),
) -> InputResponses:
    """The answers to every input request of the stored result, or `Suspended` with the
    interactions still unanswered (all of them, so one pause posts every card of the round).

    The interaction ids hash the request and a digest of its `requestState`: the same stored
    round always gives the same ids, and a later round (a new state) new ones, so a second
    round is a new card even when it asks the same question. `answerers` (who may answer
    instead of the requester alone, users or groups) is stored with the question, unhashed."""
    result = read_held(held)
    round_digest = hashlib.sha256((result.request_state or "").encode()).hexdigest()[:16]
    answers: InputResponses = {}
    waiting: list[Suspended] = []
    expires = held.get("expiresAt")
    for key, request in sorted((result.input_requests or {}).items()):
        given = _without_asking(request)
        if given is not None:
            answers[key] = given
            continue
        asked = _asked(key, request, server=server, tool=tool, round_digest=round_digest)
        unhashed: dict[str, Any] = {"answerers": list(answerers)} if answerers else {}
        if isinstance(expires, int | float):
            unhashed["expires_at"] = expires
        try:
            answer = scope.suspend(asked.payload, ELICITATION, asked.schema, unhashed=unhashed)
        except Suspended as pause:
            waiting.append(pause)
            continue
        answers[key] = as_result(answer)
    if waiting:
        raise Suspended(*(i for pause in waiting for i in pause.interactions))
    return answers


def as_result(answer: Any) -> ElicitResult:
    """A stored answer (validated against `answer_schema` when it was given) as the server's
    `ElicitResult`."""
    action = answer.get("action") if isinstance(answer, dict) else None
    if action not in _ACTIONS:
        raise Unanswerable("the stored answer to the server's question cannot be read")
    content = answer.get("content") if action == "accept" else None
    return ElicitResult(action=action, content=content if isinstance(content, dict) else None)


def _without_asking(request: InputRequest) -> InputResponse | None:
    """What handback answers itself: no roots; a URL that is not https is declined unasked
    (no card offers to open it)."""
    match request:
        case ListRootsRequest():
            return ListRootsResult(roots=[])
        case CreateMessageRequest():
            raise Unanswerable("the server asked to sample a model, which handback does not offer")
        case ElicitRequest(params=ElicitRequestURLParams(url=url)) if not is_https(url):
            return ElicitResult(action="decline")
        case ElicitRequest():
            return None
        case _:
            assert_never(request)


def _asked(key: str, request: InputRequest, *, server: str, tool: str, round_digest: str) -> _Asked:
    assert isinstance(request, ElicitRequest)
    params = request.params
    base = {"server": server, "tool": tool, "request": key, "round": round_digest}
    match params:
        case ElicitRequestFormParams():
            requested = dict(params.requested_schema)
            payload = {**base, "mode": "form", "message": params.message, "schema": requested}
            return _Asked(
                key=key, payload=payload, schema=answer_schema("form", requested), mode="form"
            )
        case ElicitRequestURLParams():
            payload = {
                **base,
                "mode": "url",
                "message": params.message,
                "url": params.url,
                "host": urlsplit(params.url).hostname or "",
            }
            if params.elicitation_id is not None:
                payload["elicitation_id"] = params.elicitation_id
            return _Asked(key=key, payload=payload, schema=answer_schema("url"), mode="url")
        case _:
            assert_never(params)


_URL_LIMIT: Final = 3000
"""Slack's limit on a link button's URL."""


def is_https(url: str) -> bool:
    """Only an https URL with a host, short enough for a link button, is offered to open."""
    parts = urlsplit(url)
    return parts.scheme == "https" and bool(parts.hostname) and len(url) <= _URL_LIMIT
