"""The message calls the app makes (post, update, react, views, conversations), each one
logged instead of raised when Slack says no.

A failed `chat.update` or reaction must not abort a resume that already happened, so every call
here returns what it could do and logs what it could not. The agent calls (session status,
streams) are `Chat.agent_surface` (`_agent_surface.py`); answers through a payload's
`response_url` go through `_response_url.py`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import blocks

from .. import _metrics

# `NOT_AN_AGENT` too, under the name tests know it by.
from ._agent_surface import NOT_AN_AGENT, AgentSurface
from ._response_url import post_response

__all__ = [
    "MAX_UPDATE_TEXT",
    "NOT_AN_AGENT",
    "Chat",
    "Posted",
    "escape",
    "fit_text",
]


@dataclass(frozen=True, kw_only=True)
class Posted:
    """What `chat.postMessage` did: `posted` with the message's ts, or `refused` with Slack's
    error code."""

    kind: Literal["posted", "refused"]
    value: str


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
        self._team_id: str | None = None
        self._url: str | None = None
        self.agent_surface = AgentSurface(client, ui=ui, team_id=self.team_id)
        """The agent calls, and whether this process shows turns as agent sessions."""

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
        body = {"response_type": "ephemeral", "replace_original": False, "text": fit_text(text)}
        return await post_response(response_url, body, api_url=str(self.client.base_url))

    async def replace_clicked(
        self, response_url: str, text: str, *, blocks: list[dict[str, Any]]
    ) -> bool:
        """Replace the message a click came from through the click's `response_url`
        (`replace_original`): the only way to change an ephemeral message, which `chat.update`
        cannot find. Only to Slack's hosts, as `respond`."""
        body = {"replace_original": True, "text": fit_text(text), "blocks": blocks}
        return await post_response(response_url, body, api_url=str(self.client.base_url))

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

    async def team_id(self) -> str | None:
        """The workspace's id (`auth.test`, asked once): streams outside DMs name the
        recipient's team, and a person who asks is in the app's workspace."""
        if self._team_id is None:
            data = await self._call("auth_test")
            if data and data.get("team_id"):
                self._team_id = str(data["team_id"])
        return self._team_id

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
