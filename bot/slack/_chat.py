"""The Web API calls the app makes, each one logged instead of raised when Slack says no.

A failed `chat.update` or reaction must not abort a resume that already happened, so every call
here returns what it could do and logs what it could not.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import blocks

from .. import _metrics

__all__ = ["Chat", "escape", "fit_text"]

log = logging.getLogger("handback.slack")

_MAX_TEXT = 39_000
"""Slack truncates message text past 40,000 characters; stay under it with room to spare."""


def escape(text: str) -> str:
    """Escape mrkdwn control characters so text cannot ping `<!channel>` or forge a link, and
    show bidi controls and invisible characters as `\\uXXXX` (`blocks.escape`)."""
    return blocks.escape(text)


def fit_text(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Chat:
    """Posting, updating and reacting in Slack through one `AsyncWebClient`."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    async def _call(self, method: str, **kwargs: Any) -> dict[str, Any] | None:
        try:
            response = await getattr(self.client, method)(**kwargs)
        except SlackApiError as error:
            code = str(error.response.get("error"))
            _metrics.SLACK_API_ERRORS.labels(method=method, error=code).inc()
            log.warning("slack %s failed: %s", method, code)
            return None
        except (aiohttp.ClientError, TimeoutError) as error:
            _metrics.SLACK_API_ERRORS.labels(method=method, error="unreachable").inc()
            log.warning("slack %s failed: %r", method, error)
            return None
        return dict(response.data) if isinstance(response.data, dict) else {}

    async def post(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """Post a message; its ts, or None when Slack refused."""
        kwargs: dict[str, Any] = {"channel": channel, "text": fit_text(text)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if blocks is not None:
            kwargs["blocks"] = blocks
        data = await self._call("chat_postMessage", **kwargs)
        return str(data["ts"]) if data and data.get("ts") else None

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> bool:
        # An empty list removes the old blocks (buttons); leaving `blocks` out would keep them.
        data = await self._call(
            "chat_update", channel=channel, ts=ts, text=fit_text(text), blocks=blocks or []
        )
        return data is not None

    async def ephemeral(
        self, channel: str, user: str, text: str, *, thread_ts: str | None = None
    ) -> bool:
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": fit_text(text)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        return await self._call("chat_postEphemeral", **kwargs) is not None

    async def react(self, channel: str, ts: str, name: str) -> bool:
        return (
            await self._call("reactions_add", channel=channel, timestamp=ts, name=name) is not None
        )

    async def unreact(self, channel: str, ts: str, name: str) -> bool:
        data = await self._call("reactions_remove", channel=channel, timestamp=ts, name=name)
        return data is not None

    async def open_view(self, trigger_id: str, view: dict[str, Any]) -> bool:
        return await self._call("views_open", trigger_id=trigger_id, view=view) is not None
