"""Admission: which verified payloads reach Bolt, and what the edge answers the others.

A payload must fit the edge's models (`_edge_models.py`; a click's and a form's are the ones the
worker reads them with, `blocks/_slack_models.py`) and be one a listener takes. One that does
not fit gets a 400 (an event gets its ack, so Slack does not send it again) and one log line;
one no listener takes is acked. Socket Mode payloads arrive verified, so
`CheckedSocketModeHandler` applies only this check.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

import blocks

# The models of the payloads that carry a click or a form live with the code that reads them
# (`blocks/_slack_models.py`): one model each, checked here and read there.
from blocks._slack_models import BlockActions, Envelope, Model, ViewSubmission

from .. import _metrics
from ._body import Misfit
from ._edge_models import (
    REASON_LIMIT,
    EventCallback,
    HomeCallback,
    PersonCallback,
    SlashCommand,
    StopCallback,
    UrlVerification,
    misfit_reason,
)

__all__ = ["CheckedSocketModeHandler", "Refused", "check_payload"]

log = logging.getLogger("handback.slack")

_PERSON_EVENTS: Final = frozenset({"message", "app_mention"})
_STOP_EVENT: Final = "agent_session_stopped"
_HOME_EVENT: Final = "app_home_opened"

_ROUTED: Final[dict[str, type[Envelope]]] = {
    "url_verification": UrlVerification,
    "event_callback": EventCallback,
    "block_actions": BlockActions,
    "view_submission": ViewSubmission,
}
"""The payloads handed to Bolt; any other `type` is acked here (no listener wants it)."""


@dataclass(kw_only=True)
class Refused:
    """Why the edge answers a request itself instead of handing it to Bolt."""

    status: int
    reason: str
    misfit: bool = True
    """The payload does not fit (a warning), rather than fitting but wanted by no listener."""

    def log(self) -> None:
        """The one log line of a refusal."""
        if not self.misfit:
            log.info("acked a Slack request no listener takes: %s", self.reason)
        elif self.status == 200:
            log.warning("acked a Slack event that does not fit: %s", self.reason)
        else:
            log.warning("refused a malformed Slack request: %s", self.reason)


def _check(model: type[Model], body: Mapping[str, Any]) -> None:
    try:
        model.model_validate(body)
    except ValidationError as error:
        raise Misfit(misfit_reason(error)) from None


def _is_text(value: Any) -> bool:
    """Whether every string in `value` is valid Unicode text (no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_payload(body: dict[str, Any], *, text_checked: bool = False) -> Refused | None:
    """None when Bolt may have `body`: it fits the models and a listener takes it; else what to
    answer instead (an event's answer is its ack: Slack would send it again until it is one).

    `text_checked`: the caller knows every string in `body` is valid text (no lone surrogate).
    """
    kind = body.get("type")
    if kind is None and "command" in body:
        try:
            _check(SlashCommand, body)
        except Misfit as error:
            return Refused(status=400, reason=f"a slash command does not fit: {error}")
        return None
    if not isinstance(kind, str):
        return Refused(status=400, reason="the payload has no `type`")
    model = _ROUTED.get(kind)
    if model is None:
        shown = repr(kind)[:REASON_LIMIT]
        return Refused(status=200, reason=f"no listener for payloads of type {shown}", misfit=False)
    if not (text_checked or _is_text(body)):
        # A lone surrogate cannot be written anywhere (UTF-8, a log line, a store): whatever
        # field holds it, the payload is no text Slack would send.
        status = 200 if model is EventCallback else 400
        return Refused(status=status, reason=f"{kind} holds a lone surrogate, which is not text")
    try:
        _check(model, body)
        if model is EventCallback and body["event"]["type"] in _PERSON_EVENTS:
            _check(PersonCallback, body)
        if model is EventCallback and body["event"]["type"] == _STOP_EVENT:
            _check(StopCallback, body)
        if model is EventCallback and body["event"]["type"] == _HOME_EVENT:
            _check(HomeCallback, body)
    except Misfit as error:
        status = 200 if model is EventCallback else 400
        return Refused(status=status, reason=f"{kind} does not fit: {error}")
    unheard = _unheard(kind, body)
    if unheard is not None:
        return Refused(status=200, reason=unheard, misfit=False)
    return None


def _unheard(kind: str, body: dict[str, Any]) -> str | None:
    """Why no listener takes this (fitting) payload, or None; Bolt would answer 404 and log a
    page of advice, and Slack would send an event again, so the edge acks it instead."""
    if kind == "event_callback" and body["event"]["type"] not in {
        *_PERSON_EVENTS,
        _STOP_EVENT,
        _HOME_EVENT,
    }:
        return f"no listener for events of type {repr(body['event']['type'])[:REASON_LIMIT]}"
    if kind == "block_actions" and not blocks.ACTION_PATTERN.match(body["actions"][0]["action_id"]):
        return "a click on a control that is not handback's"
    if kind == "view_submission" and not blocks.CALLBACK_PATTERN.match(body["view"]["callback_id"]):
        return "a submission of a view that is not handback's"
    return None


class CheckedSocketModeHandler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, but a payload that does not fit (`check_payload`) is acked
    with one log line and never reaches Bolt, as over HTTP."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        started = time.perf_counter()
        kind = req.type if req.type in _metrics.SOCKET_TYPES else "other"
        try:
            payload = req.payload if isinstance(req.payload, dict) else {}
            refused = check_payload(payload)
            if refused is None:
                # Bolt sends the envelope's ack when the listener has acked: this is its latency.
                await super().handle(client, req)
                return
            refused.log()
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
        finally:
            _metrics.SOCKET_ACK_SECONDS.labels(type=kind).observe(time.perf_counter() - started)
