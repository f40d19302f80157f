"""The Web API calls the app makes, each one logged instead of raised when Slack says no.

A failed `chat.update` or reaction must not abort a resume that already happened, so every call
here returns what it could do and logs what it could not. The agent calls (session status,
streams) also decide the process's surface: with `HANDBACK_SLACK_UI=auto`, the first refusal that
says the app is not an agent turns this process to classic messages, with one log line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.models.messages.chunk import Chunk
from slack_sdk.web.async_client import AsyncWebClient
from yarl import URL

import blocks

from .. import _metrics

__all__ = [
    "MAX_UPDATE_TEXT",
    "NOT_AN_AGENT",
    "STREAM_OVER",
    "Chat",
    "Posted",
    "SessionStatus",
    "StreamResult",
    "escape",
    "fit_text",
    "is_dm",
]

SessionStatus = Literal["processing", "active", "suspended", "closed"]


@dataclass(frozen=True, kw_only=True)
class Posted:
    """What `chat.postMessage` did: `posted` with the message's ts, or `refused` with Slack's
    error code."""

    kind: Literal["posted", "refused"]
    value: str


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

_MEMBER_PAGES = 20
"""Pages of 1000 members read at most: a bigger conversation is refused, never half-read."""

_MAX_TEXT = 39_000
"""Slack truncates message text past 40,000 characters; stay under it with room to spare."""

MAX_UPDATE_TEXT = 4_000
"""`chat.update` answers `msg_too_long` past Slack's 4,000-character message text limit
(docs.slack.dev chat.update and chat.postMessage; LocalSlack's limit table)."""


def escape(text: str) -> str:
    """Escape mrkdwn control characters so text cannot ping `<!channel>` or forge a link, and
    show bidi controls and invisible characters as `\\uXXXX` (`blocks.escape`)."""
    return blocks.escape(text)


def fit_text(text: str, limit: int = _MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Chat:
    """Posting, updating and reacting in Slack through one `AsyncWebClient`."""

    def __init__(
        self, client: AsyncWebClient, *, ui: Literal["auto", "agent", "classic"] = "auto"
    ) -> None:
        self.client = client
        self.ui = ui
        self.agent_view = ui != "classic"
        """Whether turns show as agent sessions; `auto` turns it off at Slack's first refusal."""
        self._team_id: str | None = None
        self._url: str | None = None
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

    async def _call(self, method: str, **kwargs: Any) -> dict[str, Any] | None:
        data = await self._call_or_code(method, **kwargs)
        return data if isinstance(data, dict) else None

    async def _call_or_code(self, method: str, **kwargs: Any) -> dict[str, Any] | str:
        """The call's data, or Slack's error code (`unreachable` when Slack was not reached)."""
        try:
            response = await getattr(self.client, method)(**kwargs)
        except SlackApiError as error:
            code = str(error.response.get("error"))
            _metrics.SLACK_API_ERRORS.labels(method=method, error=code).inc()
            log.warning("slack %s failed: %s", method, code)
            return code
        except (aiohttp.ClientError, TimeoutError) as error:
            _metrics.SLACK_API_ERRORS.labels(method=method, error="unreachable").inc()
            log.warning("slack %s failed: %r", method, error)
            return "unreachable"
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
        posted = await self.try_post(channel, text, thread_ts=thread_ts, blocks=blocks)
        return posted.value if posted.kind == "posted" else None

    async def try_post(
        self,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> Posted:
        """Post a message: its ts, or Slack's error code (`not_in_channel`, ...)."""
        kwargs: dict[str, Any] = {"channel": channel, "text": fit_text(text)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if blocks is not None:
            kwargs["blocks"] = blocks
        data = await self._call_or_code("chat_postMessage", **kwargs)
        if isinstance(data, str):
            return Posted(kind="refused", value=data)
        if not data.get("ts"):
            return Posted(kind="refused", value="no_ts")
        return Posted(kind="posted", value=str(data["ts"]))

    async def already_posted(
        self, channel: str, thread_ts: str, text: str, *, since: float
    ) -> bool:
        """Whether a bot posted `text` (as a plain message) in the thread at or after `since`
        (epoch seconds): `conversations.replies`, asked only by a retry whose earlier attempt
        ended its run and may have died after posting the answer, before its work was done."""
        data = await self._call("conversations_replies", channel=channel, ts=thread_ts, limit=1000)
        messages = data.get("messages") if data else None
        if not isinstance(messages, list):
            return False  # Unknown: posting again beats losing the answer.
        fitted = fit_text(text)
        for message in messages:
            if not isinstance(message, dict) or not message.get("bot_id"):
                continue
            try:
                posted_at = float(message.get("ts", ""))
            except ValueError:
                continue
            said = str(message.get("text", ""))
            # The answer may follow what the turn showed before it, in the same message.
            if not message.get("blocks") and said.endswith(fitted) and posted_at >= since:
                return True
        return False

    async def card_in_thread(self, channel: str, thread_ts: str, interaction_id: str) -> str | None:
        """The ts of a card of `interaction_id` the bot already posted in the thread (its blocks
        carry the interaction's `block_id`s), or None: `conversations.replies`, asked only by a
        retry whose earlier attempt may have died between posting the card and saving its ts.
        None too when Slack cannot say: a card posted twice beats a request without one."""
        data = await self._call("conversations_replies", channel=channel, ts=thread_ts, limit=1000)
        messages = data.get("messages") if data else None
        if not isinstance(messages, list):
            return None
        for message in messages:
            if not isinstance(message, dict) or not message.get("bot_id"):
                continue
            found = message.get("blocks")
            if not isinstance(found, list) or not message.get("ts"):
                continue
            for block in found:
                part = isinstance(block, dict) and blocks.parse_block_id(str(block.get("block_id")))
                if part and part[0] == interaction_id:
                    return str(message["ts"])
        return None

    async def respond(self, response_url: str, text: str) -> bool:
        """Answer a slash command or click through its `response_url`, to that person alone:
        works where the bot cannot post (a channel it is not in). Only to Slack's hosts (or the
        Web API host the bot is configured with, such as LocalSlack): the URL came in a payload,
        and the bot sends nothing elsewhere."""
        if not _slack_url(response_url, str(self.client.base_url)):
            log.warning("refused to answer through a response_url not at Slack")
            return False
        body = {"response_type": "ephemeral", "replace_original": False, "text": fit_text(text)}
        return await self._respond(response_url, body)

    async def replace_clicked(
        self, response_url: str, text: str, *, blocks: list[dict[str, Any]]
    ) -> bool:
        """Replace the message a click came from through the click's `response_url`
        (`replace_original`): the only way to change an ephemeral message, which `chat.update`
        cannot find. Only to Slack's hosts, as `respond`."""
        if not _slack_url(response_url, str(self.client.base_url)):
            log.warning("refused to answer through a response_url not at Slack")
            return False
        body = {"replace_original": True, "text": fit_text(text), "blocks": blocks}
        return await self._respond(response_url, body)

    async def _respond(self, response_url: str, body: dict[str, Any]) -> bool:
        try:
            timeout = aiohttp.ClientTimeout(total=_RESPOND_SECONDS)
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.post(response_url, json=body) as response,
            ):
                if response.status == 200:
                    return True
                log.warning("slack response_url answered %s", response.status)
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("slack response_url failed: %r", error)
        return False

    async def update(
        self, channel: str, ts: str, text: str, *, blocks: list[dict[str, Any]] | None = None
    ) -> bool:
        # An empty list removes the old blocks (buttons); leaving `blocks` out would keep them.
        data = await self._call(
            "chat_update",
            channel=channel,
            ts=ts,
            text=fit_text(text, MAX_UPDATE_TEXT),
            blocks=blocks or [],
        )
        return data is not None

    async def ephemeral(
        self,
        channel: str,
        user: str,
        text: str,
        *,
        thread_ts: str | None = None,
        blocks: list[dict[str, Any]] | None = None,
    ) -> bool:
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": fit_text(text)}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        if blocks is not None:
            kwargs["blocks"] = blocks
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

    async def publish_view(self, user: str, view: dict[str, Any]) -> bool:
        """Publish `user`'s App Home view (`views.publish`); False when Slack refused it."""
        return await self._call("views_publish", user_id=user, view=view) is not None

    async def workspace_url(self) -> str | None:
        """The workspace's URL (`https://<name>.slack.com/`, from `auth.test`, asked once), which
        permalinks start with."""
        if self._url is None:
            data = await self._call("auth_test")
            if data and isinstance(data.get("url"), str):
                self._url = str(data["url"])
            if data and data.get("team_id") and self._team_id is None:
                self._team_id = str(data["team_id"])
        return self._url

    # ------------------------------------------------------------ the agent surface

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
            if self.agent_view:
                self.agent_view = False
                log.warning(
                    "Slack refused %s (%s): this app is not set up as an agent (see "
                    "manifest.yml, features.agent_view and assistant:write); using classic "
                    "messages from now on",
                    method,
                    code,
                )
            return
        log.warning("slack %s failed: %s (HANDBACK_SLACK_UI=agent)", method, code)

    async def team_id(self) -> str | None:
        """The workspace's id (`auth.test`, asked once): streams outside DMs name the
        recipient's team, and a person who asks is in the app's workspace."""
        if self._team_id is None:
            data = await self._call("auth_test")
            if data and data.get("team_id"):
                self._team_id = str(data["team_id"])
        return self._team_id

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
        if not self.agent_view:
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
        if not self.agent_view or self.clock() < self._streams_paused_until:
            return None
        kwargs: dict[str, Any] = {"channel": channel, "thread_ts": thread_ts}
        if not is_dm(channel) and recipient:
            kwargs["recipient_user_id"] = recipient
            kwargs["recipient_team_id"] = await self.team_id()
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

    async def delete(self, channel: str, ts: str) -> bool:
        return await self._call("chat_delete", channel=channel, ts=ts) is not None

    async def conversation_info(self, channel: str) -> dict[str, Any] | None:
        """The channel as `conversations.info` describes it; None when Slack refused."""
        data = await self._call("conversations_info", channel=channel)
        found = data.get("channel") if data else None
        return found if isinstance(found, dict) else None

    async def conversation_members(self, channel: str) -> frozenset[str] | None:
        """Everyone in the channel (`conversations.members`, every page); None when Slack
        refused a page or the channel has more than `_MEMBER_PAGES` pages of them."""
        members: set[str] = set()
        cursor: str | None = None
        for _ in range(_MEMBER_PAGES):
            kwargs: dict[str, Any] = {"channel": channel, "limit": 1000}
            if cursor:
                kwargs["cursor"] = cursor
            data = await self._call("conversations_members", **kwargs)
            page = data.get("members") if data else None
            if not isinstance(page, list):
                return None
            members.update(str(member) for member in page)
            meta = data.get("response_metadata") if data else None
            cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
            if not cursor:
                return frozenset(members)
        log.warning("not reading the members of %s: more than %d pages", channel, _MEMBER_PAGES)
        return None


def _stream_result(data: dict[str, Any] | str) -> StreamResult:
    if isinstance(data, dict):
        return "ok"
    return "not_streaming" if data in STREAM_OVER else "failed"


_RESPOND_SECONDS = 10.0
_SLACK_HOSTS = frozenset({"hooks.slack.com", "hooks.slack-gov.com"})


def _slack_url(url: str, api_url: str) -> bool:
    """Whether `url` is at Slack: https on one of its hooks hosts, or on the configured Web API's
    own scheme, host and port."""
    try:
        found, api = URL(url), URL(api_url)
    except (ValueError, TypeError):
        return False
    if found.scheme == "https" and found.host in _SLACK_HOSTS and found.user is None:
        return found.explicit_port is None
    return (found.scheme, found.host, found.port) == (api.scheme, api.host, api.port) and (
        found.user is None and found.host is not None
    )


def is_dm(channel: str) -> bool:
    """Whether `channel` is a direct-message conversation (Slack's ids start with D; channels'
    with C, private ones' with G)."""
    return channel.startswith("D")
