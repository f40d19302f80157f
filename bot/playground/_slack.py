"""A local stand-in for Slack: an in-memory workspace, its Web API, and a driver for the bot.

The bot's real `slack_sdk` client calls this server through `SLACK_API_URL`; people are played
by helpers that post signed events and interactivity payloads to the bot's real `/slack/events`
endpoint, exactly as Slack would. Tests and the playground page both build on it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlencode

from aiohttp import web

from ._changes import Change, ChangeKind
from ._delivery import BotResponse, HttpDelivery, SocketMode, Target
from ._interactive import block_actions, home_block_actions, view_submission
from ._payloads import (
    agent_session_stopped,
    app_home_opened,
    event_callback,
    message_events,
    slash_command,
)
from ._responses import ResponseUrls
from ._webapi import WebApi
from ._workspace_model import AgentSession, ApiCall, Ephemeral, Message, OpenedView, Workspace

__all__ = [
    "AgentSession",
    "ApiCall",
    "BotResponse",
    "Change",
    "ChangeKind",
    "Ephemeral",
    "LocalSlack",
    "Message",
    "OpenedView",
    "Target",
]


class LocalSlack(Workspace):
    """An in-memory Slack workspace serving the Web API and playing its people.

    Use it as an async context manager; it listens on `host:port` (port 0 picks a free one) and
    exposes `api_url` (the `SLACK_API_URL` for the bot). With `agent_view` the app is declared
    as an agent and may use the agent methods; without (the default, as for an app installed
    from a manifest without `features.agent_view`) Slack refuses them with `not_authorized`.
    Set `bot_url` to the bot's `/slack/events` URL before driving it, or `bot_urls` to several
    bot processes' URLs: each delivery then goes where its `to` says, by default (`route`) to
    the next one in turn.
    """

    def __init__(
        self,
        *,
        signing_secret: str = "local-signing-secret",
        bot_token: str = "xoxb-local-token",
        bot_url: str | None = None,
        bot_urls: Sequence[str] = (),
        host: str = "127.0.0.1",
        port: int = 0,
        team_id: str = "T0LOCAL",
        api_app_id: str = "A0HANDBACK",
        bot_user_id: str = "U0HANDBACK",
        bot_id: str = "B0HANDBACK",
        app_token: str = "xapp-local-token",
        with_demo_people: bool = True,
        agent_view: bool = False,
    ) -> None:
        super().__init__(
            team_id=team_id,
            api_app_id=api_app_id,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            bot_token=bot_token,
            app_token=app_token,
            with_demo_people=with_demo_people,
        )
        self.signing_secret = signing_secret
        if not agent_view:
            self.agent_refusal = "not_authorized"
        self.bot_urls: list[str] = [*([bot_url] if bot_url else []), *bot_urls]
        """The bot endpoints (`/slack/events` URLs) deliveries go to over HTTP."""
        self.route: Target = "next"
        """Where a delivery without its own `to` goes."""
        self.host = host
        self.port = port
        self.delivery: Literal["http", "socket"] = "http"
        """How events and interactivity reach the bot: POSTs to `bot_url`, or envelopes over
        the Socket Mode WebSocket the bot opened (`apps.connections.open`)."""

        self._api = WebApi(self, socket_url=self._socket_url)
        self._responses = ResponseUrls(self, lambda: f"{self.api_url}response/")
        self._http = HttpDelivery(signing_secret)
        self._socket_mode = SocketMode(self)
        self._runner: web.AppRunner | None = None
        self._closed = False

    @property
    def bot_url(self) -> str | None:
        """The first bot endpoint; setting it makes it the only one."""
        return self.bot_urls[0] if self.bot_urls else None

    @bot_url.setter
    def bot_url(self, url: str | None) -> None:
        self.bot_urls = [url] if url else []

    async def press_stop(
        self, user: str, channel: str, thread_ts: str, *, to: Target | None = None
    ) -> BotResponse:
        """A person presses the stop button of the thread's agent session: Slack stops the app's
        streams in the thread and sends `agent_session_stopped` (the session's status is the
        app's to change)."""
        stopped = await self.stop_streams(channel, thread_ts)
        event = agent_session_stopped(
            user, channel, thread_ts, stopped=stopped, event_ts=self.new_ts()
        )
        return await self.send_event(event, to=to)

    async def stop_streams(self, channel: str, thread_ts: str) -> list[str]:
        """Slack's side of the stop button: the app's streams in the thread end, and answer
        `stopped_by_user` from then on; the ts of each one stopped."""
        stopped = []
        for message in self.thread(channel, thread_ts):
            if message.streaming:
                message.streaming = False
                message.stopped_by_user = True
                stopped.append(message.ts)
                await self.publish("message_updated", {"channel": channel, **message.to_api()})
        return stopped

    # ---------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._closed:
            raise RuntimeError("this LocalSlack was closed; make a new one")
        if self._runner is not None:
            return
        app = web.Application()
        app.router.add_post("/api/response/{key}", self._responses.handle)
        app.router.add_route("*", "/api/{method}", self._api.handle)
        app.router.add_get("/socket-mode", self._socket_mode.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self._http.open()

    async def aclose(self) -> None:
        self._closed = True
        await self._socket_mode.close()
        await self._http.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def api_url(self) -> str:
        """The Web API base URL for `slack_sdk` (`SLACK_API_URL`), ending with a slash."""
        return f"http://{self.host}:{self.port}/api/"

    @property
    def socket_connected(self) -> bool:
        return self._socket_mode.connected

    def _socket_url(self) -> str:
        return f"ws://{self.host}:{self.port}/socket-mode?ticket={uuid.uuid4().hex}"

    # -------------------------------------------------------------- the people

    async def post_user_message(
        self,
        user: str,
        channel: str,
        text: str,
        *,
        thread_ts: str | None = None,
        mention: bool = True,
        deliver: bool = True,
        to: Target | None = None,
    ) -> Message:
        """Post a person's message and deliver the events Slack would send the bot.

        In a channel a mention yields both `app_mention` and `message` events (an app subscribed
        to both gets both); without a mention only `message`. In a DM only `message`. With
        `deliver=False` the message is only stored. `to` picks the bot endpoint of each event
        (see `send_raw`).
        """
        if channel not in self.channels:
            raise KeyError(f"no channel {channel!r}")
        if mention and not self.channels[channel].is_im:
            text = f"<@{self.bot_user_id}> {text}"
        message = Message(
            channel=channel, ts=self.new_ts(), text=text, user=user, thread_ts=thread_ts
        )
        self.messages.append(message)
        await self.publish("message", {"channel": channel, **message.to_api()})
        if deliver:
            for event in message_events(self, message):
                await self.send_event(event, to=to)
        return message

    async def send_event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """Deliver one event to the bot (a retry repeats `event_id` with `retry_num`); with
        `to="all"` every endpoint gets the very same envelope."""
        envelope = event_callback(self, event, event_id=event_id)
        if self.delivery == "socket":
            return await self._socket_mode.send("events_api", envelope, retry_num or 0)
        headers = {"Content-Type": "application/json"}
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return await self.send_raw(json.dumps(envelope), headers=headers, to=to)

    def block_actions_payload(
        self,
        user: str,
        message_ts: str,
        action_id: str,
        *,
        value: str | None = None,
        selected: str | list[str] | None = None,
        channel: str | None = None,
    ) -> dict[str, Any]:
        """A real `block_actions` payload for a person acting on a stored message.

        The element is found in the message's blocks by `action_id` (and `value` for buttons that
        share an action id). `selected` picks options of a select by value or label.
        """
        return block_actions(
            self,
            user,
            message_ts,
            action_id,
            value=value,
            selected=selected,
            channel=channel,
            response_url=self._click_response_url(user, message_ts, channel),
        )

    def _click_response_url(self, user: str, message_ts: str, channel: str | None) -> str:
        """The `response_url` of a click on message `message_ts`: it may replace (or delete)
        that message, the only way to change an ephemeral one."""
        shown = self.find_ephemeral(user, message_ts)
        where = channel or str(getattr(self.find_message(message_ts) or shown, "channel", ""))
        return self._responses.issue(where, user, source=message_ts)

    async def click(
        self,
        user: str,
        message_ts: str,
        action_id: str,
        *,
        value: str | None = None,
        selected: str | list[str] | None = None,
        channel: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """A person clicks a button or picks from a select on a stored message."""
        payload = self.block_actions_payload(
            user, message_ts, action_id, value=value, selected=selected, channel=channel
        )
        return await self.send_interactivity(payload, to=to)

    async def open_home(self, user: str, *, to: Target | None = None) -> BotResponse:
        """A person opens the app's Home tab: Slack sends `app_home_opened` (with the view it
        shows them, if the app published one)."""
        if user not in self.users:
            raise KeyError(f"no user {user!r}")
        event = app_home_opened(self, user, event_ts=self.new_ts())
        return await self.send_event(event, to=to)

    async def click_home(
        self,
        user: str,
        action_id: str,
        *,
        value: str | None = None,
        selected: str | list[str] | None = None,
        interaction_id: str | None = None,
        block_id: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """A person clicks a button (or picks from a select) in their App Home view: the
        control in the block `block_id`, or of the request `interaction_id` (default: the first
        that has `action_id`)."""
        prefix = block_id or (f"hb|{interaction_id}|" if interaction_id else "")
        payload = home_block_actions(
            self, user, action_id, value=value, selected=selected, block_prefix=prefix
        )
        return await self.send_interactivity(payload, to=to)

    def view_submission_payload(
        self, user: str, view_id: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A `view_submission` payload; `values` maps each input block_id to what was typed.

        A string fills a text, number or date input; an option value or label (or a list of them)
        fills a select. Inputs left out are submitted empty.
        """
        return view_submission(self, user, view_id, values)

    async def submit_view(
        self, user: str, view_id: str, values: Mapping[str, Any], *, to: Target | None = None
    ) -> BotResponse:
        """Submit a modal; the bot's JSON answer (e.g. `response_action: errors`) comes back.

        The view closes unless the bot answered with errors or another response action.
        """
        payload = self.view_submission_payload(user, view_id, values)
        response = await self.send_interactivity(payload, to=to)
        body = response.json() if response.status == 200 and response.body.strip() else None
        if response.status == 200 and not (isinstance(body, dict) and body.get("response_action")):
            self.views[view_id].closed = True
            await self.publish("view_updated", asdict(self.views[view_id]))
        return response

    async def run_command(
        self,
        user: str,
        channel: str,
        command: str,
        text: str = "",
        *,
        trigger_id: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """A person types `/command text` in `channel`: the command is POSTed form-encoded and
        signed (or sent over Socket Mode), and a text the bot acks with is shown to that person
        alone, as Slack shows it. The same `trigger_id` again is a redelivery."""
        if channel not in self.channels:
            raise KeyError(f"no channel {channel!r}")
        trigger_id = trigger_id or self.new_trigger_id()
        self.triggers[trigger_id] = user
        fields = slash_command(
            self,
            user,
            channel,
            command,
            text,
            trigger_id=trigger_id,
            response_url=self._responses.issue(channel, user),
        )
        await self.publish(
            "call",
            {"method": "slash_command", "channel": channel, "user": user, "command": command},
        )
        if self.delivery == "socket":
            response = await self._socket_mode.send("slash_commands", dict(fields), 0)
        else:
            response = await self.send_raw(
                urlencode(fields),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
                to=to,
            )
        await self._show_ack(response, user, channel)
        return response

    async def _show_ack(self, response: BotResponse, user: str, channel: str) -> None:
        """The text of a command's ack, as the ephemeral message Slack makes of it."""
        if response.status != 200 or not response.body.strip():
            return
        try:
            body = response.json()
        except ValueError:
            body = {"text": response.body}
        text = body.get("text") if isinstance(body, dict) else None
        if not text:
            return
        ephemeral = Ephemeral(channel=channel, user=user, text=str(text), message_ts=self.new_ts())
        self.ephemerals.append(ephemeral)
        await self.publish("ephemeral", asdict(ephemeral))

    async def send_interactivity(
        self, payload: dict[str, Any], *, to: Target | None = None
    ) -> BotResponse:
        """POST an interactivity payload form-encoded as `payload=`, signed (or send it over
        Socket Mode)."""
        if self.delivery == "socket":
            return await self._socket_mode.send("interactive", payload, 0)
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send_raw(
            body, headers={"Content-Type": "application/x-www-form-urlencoded"}, to=to
        )

    async def send_raw(
        self,
        body: str,
        *,
        headers: Mapping[str, str] | None = None,
        sign: bool = True,
        timestamp: int | None = None,
        signature: str | None = None,
        to: Target | None = None,
    ) -> BotResponse:
        """POST `body` to the bot, signed as Slack signs.

        `sign=False`, an old `timestamp` or a forged `signature` make a tampered request. `to`
        picks the endpoint among `bot_urls` (default `route`): an index, `"next"` in turn, or
        `"all"` at once, which returns the first endpoint's response with every one in `each`.
        """
        return await self._http.post(
            self.bot_urls,
            self.route if to is None else to,
            body,
            headers=headers,
            sign=sign,
            timestamp=timestamp,
            signature=signature,
        )
