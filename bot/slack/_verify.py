"""The edge of `/slack/events`: verify a request before reading it, then hand it on.

Every request is verified against the signing secret (slack_sdk's `SignatureVerifier`, Slack's
5-minute window) before its body is parsed, and anything unverified gets a 401 and one log line.
A verified body is then parsed (`_body.py`) and admitted (`_admission.py`: it fits the edge's
models and a listener takes it) before Bolt reads it.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_internals import build_async_context
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.signature import SignatureVerifier

# The edge as a whole, under the names its readers have long known it by: the models it checks
# a click and a form with, its body reader and its admission check.
from blocks._slack_models import BlockActions, ViewSubmission

from ._admission import Refused, check_payload
from ._body import Misfit, is_ssl_check, parse_body

__all__ = [
    "BlockActions",
    "Dispatch",
    "Misfit",
    "SlackGate",
    "ViewSubmission",
    "check_payload",
    "parse_body",
]

log = logging.getLogger("handback.slack")

_WINDOW: Final = 60 * 5
"""Seconds a signed request stays valid (Slack's own window; a replay after it is refused)."""

_TIMESTAMP = re.compile(r"[0-9]{1,12}")

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
"""A JSON escape of a surrogate (`\\ud83d`): a pair is an emoji, a lone one no text at all."""

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
