"""What a person does on the playground page, done in the workspace as in Slack: post a message
(or a slash command), click, submit or close a modal, open the Home tab, press stop. LocalSlack
sends the bot what Slack would; the bot's answer goes back to the page."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from ._page_bodies import (
    CloseView,
    HomeAction,
    HomeOpen,
    PostAction,
    PostMessage,
    Stop,
    SubmitView,
    _BadRequest,
    read_body,
    typed,
)
from ._slack import BotResponse
from ._workspace import PlaygroundSlack

__all__ = ["PageActions"]


class PageActions:
    """The page's action endpoints over one workspace, each an aiohttp handler."""

    def __init__(self, slack: PlaygroundSlack) -> None:
        self.slack = slack

    async def post_message(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request, PostMessage)
            self.check_user(body.user)
            if body.channel not in self.slack.channels:
                raise _BadRequest(f"no channel {body.channel!r}")
            if body.thread_ts is None and body.text.startswith("/"):
                # `/deploy api 2.3 prod` in the composer is a slash command, as in Slack.
                command, _, rest = body.text.partition(" ")
                answer = await self.slack.run_command(
                    body.user, body.channel, command, rest.strip()
                )
                return web.json_response({"ok": True, "command": command, "status": answer.status})
            # A new message in the channel addresses the bot, as the page's composer says; a
            # thread reply is plain, as in Slack, so it can answer a pending free-text question.
            message = await self.slack.post_user_message(
                body.user,
                body.channel,
                body.text,
                thread_ts=body.thread_ts,
                mention=body.thread_ts is None,
            )
        except _BadRequest as error:
            return _error(str(error))
        return web.json_response({"ok": True, "ts": message.ts})

    async def stop(self, request: web.Request) -> web.Response:
        """The stop button of a thread's agent session: Slack sends `agent_session_stopped`."""
        try:
            body = await read_body(request, Stop)
            self.check_user(body.user)
            if self.slack.message(body.channel, body.thread_ts) is None:
                raise _BadRequest(f"no thread {body.thread_ts!r} in {body.channel!r}")
        except _BadRequest as error:
            return _error(str(error))
        answer = await self.slack.press_stop(body.user, body.channel, body.thread_ts)
        return _bot_answer(answer)

    async def post_action(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request, PostAction)
            self.check_user(body.user)
            # An ephemeral message is clicked as any (it is found among that person's own, as
            # Slack lets only them see it); `body.ephemeral` only says which the page showed.
            action = body.action
            selected = action.selected()
            try:
                answer = await self.slack.click(
                    body.user,
                    body.message_ts,
                    action.action_id,
                    value=action.value,
                    selected=selected,
                    channel=body.channel,
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def open_home(self, request: web.Request) -> web.Response:
        """The person opens the app's Home tab: Slack sends `app_home_opened`."""
        try:
            body = await read_body(request, HomeOpen)
            self.check_user(body.user)
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(await self.slack.open_home(body.user))

    async def home_action(self, request: web.Request) -> web.Response:
        """A click in the person's Home view, sent as Slack sends it (no channel)."""
        try:
            body = await read_body(request, HomeAction)
            self.check_user(body.user)
            action = body.action
            selected = action.selected()
            try:
                answer = await self.slack.click_home(
                    body.user,
                    action.action_id,
                    value=action.value,
                    selected=selected,
                    block_id=action.block_id,
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def submit_view(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request, SubmitView)
            self.check_user(body.user)
            values = {block_id: typed(states) for block_id, states in body.values.items()}
            try:
                answer = await self.slack.submit_view(
                    body.user,
                    body.view_id,
                    {k: v for k, v in values.items() if v is not None},
                )
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return _bot_answer(answer)

    async def close_view(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request, CloseView)
            self.check_user(body.user)
            try:
                await self.slack.close_view(body.user, body.view_id)
            except (KeyError, ValueError) as error:
                raise _BadRequest(_reason(error)) from None
        except _BadRequest as error:
            return _error(str(error))
        return web.json_response({"ok": True})

    def check_user(self, user: str) -> None:
        known = self.slack.users.get(user)
        if known is None or known.is_bot:
            raise _BadRequest(f"no person {user!r} in this workspace")


def _reason(error: Exception) -> str:
    # KeyError's str() adds quotes around the message.
    return str(error.args[0]) if error.args else type(error).__name__


def _error(message: str, status: int = 400) -> web.Response:
    return web.json_response({"ok": False, "error": message}, status=status)


def _bot_answer(answer: BotResponse) -> web.Response:
    """The bot's reply to an interactivity payload, for the page (errors under a modal's inputs)."""
    body: Any = None
    if answer.body.strip():
        try:
            body = answer.json()
        except json.JSONDecodeError:
            body = None
    out: dict[str, Any] = {"ok": answer.status == 200, "status": answer.status}
    if isinstance(body, dict):
        if "response_action" in body:
            out["response_action"] = body["response_action"]
        if isinstance(body.get("errors"), dict):
            out["errors"] = body["errors"]
    return web.json_response(out, status=200 if answer.status == 200 else 502)
