"""The agent calls (a thread's session status, streamed replies), and whether to make them.

They also decide the process's surface: with `HANDBACK_SLACK_UI=auto`, the first refusal that
says the app is not an agent turns this process to classic messages, with one log line. Like
every Web API call the app makes, each one returns what it could do instead of raising.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.models.messages.chunk import Chunk
from slack_sdk.web.async_client import AsyncWebClient

__all__ = [
    "NOT_AN_AGENT",
    "STREAM_OVER",
    "AgentSurface",
    "SessionStatus",
    "StreamResult",
    "is_dm",
]

SessionStatus = Literal["processing", "active", "suspended", "closed"]

StreamResult = Literal["ok", "not_streaming", "failed"]
"""What a stream call did: done, refused because the stream was stopped already (by a stop
button: `stopped_by_user`; or by an earlier attempt: `message_not_in_streaming_state`), or
failed otherwise."""

STREAM_OVER = frozenset({"stopped_by_user", "message_not_in_streaming_state"})
"""What Slack answers a stream call once the stream has ended: nothing more is to be shown
(docs.slack.dev/reference/methods/chat.appendStream: `stopped_by_user`, "The streaming message
was stopped by the user and no further appends are accepted")."""

NOT_AN_AGENT = frozenset({"not_authorized", "missing_scope", "unknown_method"})
"""What Slack answers an app not declared as an agent (no `features.agent_view`, no
`assistant:write`) for the agent methods."""

log = logging.getLogger("handback.slack")


class AgentSurface:
    """The agent methods of the Web API through one `AsyncWebClient` (`Chat.agent_surface`)."""

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        ui: Literal["auto", "agent", "classic"],
        team_id: Callable[[], Awaitable[str | None]],
    ) -> None:
        self.client = client
        self.ui = ui
        self.enabled = ui != "classic"
        """Whether turns show as agent sessions; `auto` turns it off at Slack's first refusal."""
        self._team_id = team_id
        self.clock: Callable[[], float] = time.monotonic
        self._streams_paused_until = 0.0
        # Stream starts are not retried on a 429: a turn would wait out Slack's Retry-After (up
        # to a minute) before showing anything; it posts a plain message instead.
        self._stream_client = AsyncWebClient(
            token=client.token,
            base_url=client.base_url,
            timeout=client.timeout,
            retry_handlers=[AsyncConnectionErrorRetryHandler(max_retry_count=2)],
        )

    async def _agent_call(
        self, method: str, *, client: AsyncWebClient | None = None, **kwargs: Any
    ) -> dict[str, Any] | str:
        """The call's data, or Slack's error code (`"failed"` when there is none)."""
        try:
            response = await getattr(client or self.client, method)(**kwargs)
        except SlackApiError as error:
            code = str(error.response.get("error") or "failed")
            if error.response.status_code == 429 and method == "chat_startStream":
                self._pause_streams(error.response.headers.get("Retry-After"))
            elif code in NOT_AN_AGENT:
                self._not_an_agent(method, code)
            elif code in STREAM_OVER:
                log.info("slack %s: the stream has ended (%s)", method, code)
            else:
                log.warning("slack %s failed: %s", method, code)
            return code
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("slack %s failed: %r", method, error)
            return "failed"
        return dict(response.data) if isinstance(response.data, dict) else {}

    def _pause_streams(self, retry_after: Any) -> None:
        """`chat.startStream` is rate-limited (a low tier): until Slack's `Retry-After` has
        passed, turns answer with plain messages instead of waiting for a stream."""
        try:
            seconds = max(1.0, float(retry_after))
        except (TypeError, ValueError):
            seconds = 60.0
        if self.clock() >= self._streams_paused_until:
            log.warning(
                "Slack rate-limited chat.startStream: answers are plain messages for %.0f s",
                seconds,
            )
        self._streams_paused_until = self.clock() + seconds

    def _not_an_agent(self, method: str, code: str) -> None:
        if self.ui == "auto":
            if self.enabled:
                self.enabled = False
                log.warning(
                    "Slack refused %s (%s): this app is not set up as an agent (see "
                    "manifest.yml, features.agent_view and assistant:write); using classic "
                    "messages from now on",
                    method,
                    code,
                )
            return
        log.warning("slack %s failed: %s (HANDBACK_SLACK_UI=agent)", method, code)

    async def set_status(
        self,
        channel: str,
        thread_ts: str,
        status: SessionStatus,
        *,
        title: str | None = None,
        initiator: str | None = None,
    ) -> bool:
        """Set the thread's agent session status (creating the session); False when Slack
        refused or this process shows classic messages."""
        if not self.enabled:
            return False
        data = await self._agent_call(
            "agents_sessions_setStatus",
            channel_id=channel,
            thread_ts=thread_ts,
            status=status,
            title=title,
            initiator_user_id=initiator,
        )
        return isinstance(data, dict)

    async def start_stream(
        self,
        channel: str,
        thread_ts: str,
        chunks: Sequence[Chunk],
        *,
        recipient: str | None,
    ) -> str | None:
        """Start a streamed reply in the thread; its ts, or None (the turn then answers with a
        plain message: also while Slack rate-limits the stream starts)."""
        if not self.enabled or self.clock() < self._streams_paused_until:
            return None
        kwargs: dict[str, Any] = {"channel": channel, "thread_ts": thread_ts}
        if not is_dm(channel) and recipient:
            kwargs["recipient_user_id"] = recipient
            kwargs["recipient_team_id"] = await self._team_id()
        data = await self._agent_call(
            "chat_startStream",
            client=self._stream_client,
            chunks=list(chunks),
            task_display_mode="timeline",
            **kwargs,
        )
        return str(data["ts"]) if isinstance(data, dict) and data.get("ts") else None

    async def append_stream(self, channel: str, ts: str, chunks: Sequence[Chunk]) -> StreamResult:
        data = await self._agent_call(
            "chat_appendStream", channel=channel, ts=ts, chunks=list(chunks)
        )
        return _stream_result(data)

    async def stop_stream(
        self,
        channel: str,
        ts: str,
        chunks: Sequence[Chunk] = (),
        *,
        session_status: SessionStatus | None = None,
    ) -> StreamResult:
        kwargs: dict[str, Any] = {"channel": channel, "ts": ts}
        if chunks:
            kwargs["chunks"] = list(chunks)
        if session_status is not None:
            kwargs["session_status"] = session_status
        return _stream_result(await self._agent_call("chat_stopStream", **kwargs))


def _stream_result(data: dict[str, Any] | str) -> StreamResult:
    if isinstance(data, dict):
        return "ok"
    return "not_streaming" if data in STREAM_OVER else "failed"


def is_dm(channel: str) -> bool:
    """Whether `channel` is a direct-message conversation (Slack's ids start with D; channels'
    with C, private ones' with G)."""
    return channel.startswith("D")
