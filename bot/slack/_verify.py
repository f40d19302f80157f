"""The edge of `/slack/events`: verify a request before reading it, then check what it says.

Every request is verified against the signing secret (slack_sdk's `SignatureVerifier`, Slack's
5-minute window) before its body is parsed, and anything unverified gets a 401 and one log line.
A verified body must then fit the pydantic models below (a click's and a form's are the ones
the worker reads them with, `blocks/_slack_models.py`), which type every field Bolt, the
listeners or the worker read and ignore every other: a body that does not fit gets a 400 (an
event gets its ack, so Slack does not send it again) and one log line, and never reaches Bolt.
Socket Mode payloads arrive verified,
so `CheckedSocketModeHandler` checks only the second half (`check_payload`).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from aiohttp import web
from pydantic import Field, ValidationError
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from yarl import query_to_pairs

import blocks

# The models of the payloads that carry a click or a form live with the code that reads them
# (`blocks/_slack_models.py`): one model each, checked here and read there.
from blocks._slack_models import (
    BlockActions,
    Context,
    Envelope,
    Id,
    Model,
    Nested,
    ViewSubmission,
)
from state import HandbackError

from .. import _metrics

__all__ = [
    "BlockActions",
    "CheckedSocketModeHandler",
    "EventCallback",
    "HomeOpened",
    "PersonEvent",
    "SessionStopped",
    "SlackGate",
    "SlashCommand",
    "UrlVerification",
    "ViewSubmission",
    "check_payload",
    "home_opened",
    "person_event",
    "session_stopped",
]

log = logging.getLogger("handback.slack")

MAX_DEPTH: Final = 64
"""Nesting a payload may have; Slack's own (a view with rich text in its state) stay under 20."""

_WINDOW: Final = 60 * 5
"""Seconds a signed request stays valid (Slack's own window; a replay after it is refused)."""

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_PERSON_EVENTS: Final = frozenset({"message", "app_mention"})
_STOP_EVENT: Final = "agent_session_stopped"
_HOME_EVENT: Final = "app_home_opened"
_REASON_LIMIT: Final = 200

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape of a surrogate (`\\ud83d`): a pair is an emoji, a lone one no text at all."""


class UrlVerification(Envelope):
    type: Literal["url_verification"]
    challenge: Annotated[str, Field(max_length=1000)]


class PersonEvent(Context):
    """A `message` or `app_mention` event: what decides whether it is a prompt, and where."""

    type: Literal["message", "app_mention"]
    user: Id | None = None
    channel: Id | None = None
    ts: Id | None = None
    thread_ts: Id | None = None
    text: str | None = None
    subtype: Id | None = None
    channel_type: Id | None = None
    bot_id: Id | None = None
    bot_profile: dict[str, Any] | None = None
    user_team: Id | None = None
    function_execution_id: Id | None = None
    bot_access_token: str | None = None
    inputs: dict[str, Any] | None = None
    message: Nested | None = None
    previous_message: Nested | None = None


class SessionStopped(Model):
    """`agent_session_stopped`: someone pressed stop on the thread's agent session."""

    type: Literal["agent_session_stopped"]
    channel: Annotated[Id, Field(min_length=1, max_length=64)]
    thread_ts: Annotated[Id, Field(min_length=1, max_length=64)]
    user: Annotated[Id, Field(min_length=1, max_length=64)]
    user_team: Id | None = None
    """The workspace of the person who pressed stop, when Slack says (a shared channel)."""
    team: Id | None = None
    streaming_message_ts: list[Id] = Field(default_factory=list)
    event_ts: Id | None = None


class _StopCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: SessionStopped


def session_stopped(body: Any) -> SessionStopped | None:
    """The `agent_session_stopped` event of a body the edge let through, typed."""
    try:
        return _StopCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored a stop that does not fit: %s", _reason(error))
        return None


class HomeOpened(Model):
    """`app_home_opened`: someone opened one of the app's tabs (`home`, `messages`, `about`)."""

    type: Literal["app_home_opened"]
    user: Annotated[Id, Field(min_length=1, max_length=64)]
    tab: Annotated[Id, Field(max_length=64)] = ""
    channel: Id | None = None
    event_ts: Id | None = None


class _HomeCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: HomeOpened


def home_opened(body: Any) -> HomeOpened | None:
    """The `app_home_opened` event of a body the edge let through, typed."""
    try:
        return _HomeCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored an app_home_opened that does not fit: %s", _reason(error))
        return None


class _AnyEvent(Model):
    type: str


class EventCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: _AnyEvent


class _PersonCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: PersonEvent


class SlashCommand(Model):
    """A slash command, as Slack POSTs it (a form, so every field is text)."""

    command: Annotated[str, Field(pattern=r"^/[^\s]{1,80}$")]
    text: Annotated[str, Field(max_length=4000)] = ""
    user_id: Annotated[Id, Field(min_length=1, max_length=40)]
    channel_id: Annotated[Id, Field(min_length=1, max_length=40)]
    trigger_id: Annotated[Id, Field(min_length=1, max_length=200)]
    team_id: Id | None = None
    enterprise_id: Id | None = None
    api_app_id: Id | None = None
    response_url: str | None = None
    user_name: str | None = None
    channel_name: str | None = None


_ROUTED: Final[dict[str, type[Envelope]]] = {
    "url_verification": UrlVerification,
    "event_callback": EventCallback,
    "block_actions": BlockActions,
    "view_submission": ViewSubmission,
}
"""The payloads handed to Bolt; any other `type` is acked here (no listener wants it)."""


class Misfit(HandbackError, ValueError):
    """A verified payload that does not fit the edge models; the message says where."""


def _reason(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])[:_REASON_LIMIT] or "payload"
    return f"{where}: {first['msg']}"


def _check(model: type[Model], body: Mapping[str, Any]) -> None:
    try:
        model.model_validate(body)
    except ValidationError as error:
        raise Misfit(_reason(error)) from None


def person_event(body: Any) -> PersonEvent | None:
    """The `message` or `app_mention` event of an `event_callback` body; None (and one log
    line) when the body does not fit, so an event with fields of the wrong type is no prompt."""
    try:
        return _PersonCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored an event that does not fit: %s", _reason(error))
        return None


def _depth(value: Any) -> int:
    """How deeply `value` nests lists and objects (without recursion: the value is hostile).

    Level by level, looking only at containers: a card's click holds hundreds of strings and
    numbers, and this runs before every ack."""
    level = [value] if isinstance(value, dict | list) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return depth
        below: list[Any] = []
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                if isinstance(child, dict | list):
                    below.append(child)
        level = below
    return depth


def _parse_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise Misfit("the body is not JSON") from None
    if not isinstance(value, dict):
        raise Misfit(f"the body is a JSON {type(value).__name__}, not an object")
    if _depth(value) > MAX_DEPTH:
        raise Misfit(f"the body nests deeper than {MAX_DEPTH} levels")
    return value


def _is_text(value: Any) -> bool:
    """Whether every string in `value` is valid Unicode text (no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def parse_body(text: str, content_type: str | None) -> dict[str, Any]:
    """The payload of a verified body, read the way Bolt reads it (JSON when it says so or
    starts with `{`, else a form with a `payload` field); `Misfit` when it cannot be one.

    The form is read by yarl's `query_to_pairs` (aiohttp's own form reader): the same result as
    the standard library's `parse_qsl`, whose pure-Python unquoting took ~0.1 ms of every
    click's ack (a card's payload is a few KB, a third of it %-escapes).
    """
    if content_type == "application/json" or text.startswith("{"):
        return _parse_json(text)
    try:
        form = dict(query_to_pairs(text))
    except ValueError:
        raise Misfit("the body is not a form") from None
    if "payload" not in form:
        if "command" in form:
            return form  # a slash command: the form is the payload
        raise Misfit("the form has no `payload`")
    return _parse_json(form["payload"])


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


Dispatch = Callable[[AsyncBoltRequest], Awaitable[BoltResponse]]


class _ParsedRequest(AsyncBoltRequest):
    """Bolt's HTTP request, given the payload the edge has parsed and checked already: Bolt
    would otherwise parse the same body again before every click's ack. The raw body stays, for
    Bolt's own signature check."""

    def __init__(
        self,
        *,
        raw_body: str,
        body: dict[str, Any],
        query: str,
        headers: Mapping[str, str],
    ) -> None:
        super().__init__(body="", query=query, headers=headers)  # type: ignore[arg-type]
        self.raw_body = raw_body
        self.body = body
        self.context = build_async_context(AsyncBoltContext({}), body)


class SlackGate:
    """The aiohttp handler for `/slack/events`: verify, parse, check, then hand to Bolt."""

    def __init__(self, signing_secret: str | None, dispatch: Dispatch) -> None:
        # Without a secret nothing can be verified, so nothing is let in.
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None
        self._dispatch = dispatch

    def _unverified(self, raw: bytes, headers: Mapping[str, str]) -> str | None:
        """Why the request is not from Slack, or None when it is."""
        if self._verifier is None:
            return "no signing secret is configured"
        timestamp = headers.get("X-Slack-Request-Timestamp")
        signature = headers.get("X-Slack-Signature")
        if timestamp is None or signature is None:
            return "it is not signed"
        if not _TIMESTAMP.fullmatch(timestamp):
            return "its timestamp is not a whole number of seconds"
        if abs(time.time() - int(timestamp)) > _WINDOW:
            return "its timestamp is outside the 5-minute window"
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            # Slack's bodies are UTF-8, and `SignatureVerifier` can check no other.
            return "its body is not UTF-8, so its signature cannot be checked"
        if not self._verifier.is_valid(body=raw, timestamp=timestamp, signature=signature):
            return "its signature does not match"
        return None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if is_ssl_check(raw):
            # Slack checks a slash command's Request URL this way and wants a 200; Bolt answers
            # it (`SslCheck`) before verifying, and so does the edge: nothing runs.
            return web.Response(status=200, text="")
        unverified = self._unverified(raw, request.headers)
        if unverified is not None:
            log.warning("refused a request to %s: %s", request.path, unverified)
            return web.Response(status=401, text="unverified")
        # Bolt's own reading of the header (no lower-casing): the body is read as Bolt would.
        content_type = (request.headers.get("Content-Type") or "").split(";")[0] or None
        refused, text, body = self._check(raw, content_type)
        if refused is not None:
            refused.log()
            return web.Response(
                status=refused.status, text="" if refused.status == 200 else "malformed"
            )
        try:
            bolt_request = _ParsedRequest(
                raw_body=text,
                body=body,
                query=request.query_string,
                headers=request.headers,
            )
        except Exception as error:  # Bolt's reading of the context; the models leave it nothing.
            log.warning("refused a Slack request Bolt could not read: %r", error)
            return web.Response(status=400, text="malformed")
        return await to_aiohttp_response(await self._dispatch(bolt_request))

    @staticmethod
    def _check(raw: bytes, content_type: str | None) -> tuple[Refused | None, str, dict[str, Any]]:
        """`(refusal, text, payload)`: a refusal (an event's is a 200) unless the body fits a
        payload Bolt has a listener for."""
        try:
            text = raw.decode("utf-8")
            body = parse_body(text, content_type)
        except UnicodeDecodeError:
            return Refused(status=400, reason="the body is not UTF-8"), "", {}
        except Misfit as error:
            return Refused(status=400, reason=str(error)), "", {}
        # Only a body that escapes a surrogate can hold a lone one (UTF-8 cannot encode it).
        return check_payload(body, text_checked=not _SURROGATE_ESCAPE.search(text)), text, body


_SSL_CHECK_MAX = 1000
"""Bytes an `ssl_check` body may have: Slack's is `token=...&ssl_check=1`."""


def is_ssl_check(raw: bytes) -> bool:
    """Whether `raw` is Slack's `ssl_check` of a slash command's Request URL: a small form with
    `ssl_check=1` and no command or payload (Bolt's `SslCheck` reads it the same way)."""
    if len(raw) > _SSL_CHECK_MAX or b"ssl_check=" not in raw:
        return False
    try:
        form = dict(query_to_pairs(raw.decode("utf-8")))
    except (UnicodeDecodeError, ValueError):
        return False
    return form.get("ssl_check") == "1" and "command" not in form and "payload" not in form


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
        shown = repr(kind)[:_REASON_LIMIT]
        return Refused(status=200, reason=f"no listener for payloads of type {shown}", misfit=False)
    if not (text_checked or _is_text(body)):
        # A lone surrogate cannot be written anywhere (UTF-8, a log line, a store): whatever
        # field holds it, the payload is no text Slack would send.
        status = 200 if model is EventCallback else 400
        return Refused(status=status, reason=f"{kind} holds a lone surrogate, which is not text")
    try:
        _check(model, body)
        if model is EventCallback and body["event"]["type"] in _PERSON_EVENTS:
            _check(_PersonCallback, body)
        if model is EventCallback and body["event"]["type"] == _STOP_EVENT:
            _check(_StopCallback, body)
        if model is EventCallback and body["event"]["type"] == _HOME_EVENT:
            _check(_HomeCallback, body)
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
        return f"no listener for events of type {repr(body['event']['type'])[:_REASON_LIMIT]}"
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
