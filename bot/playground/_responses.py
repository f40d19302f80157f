"""The `response_url`s LocalSlack hands out with slash commands and clicks, served as Slack
serves them: a POST with a message shows it to the person (ephemeral) or in the channel, up to
five times within 30 minutes (docs.slack.dev, 'Handling user interaction': 'you can use a
response_url up to five times within 30 minutes'); after that the URL is refused.

A click's URL may also change the message clicked: `replace_original` replaces it (text and
blocks) and `delete_original` removes it, an ephemeral one too, which is the only way an app can
change an ephemeral message (`chat.update` does not find it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Final

from aiohttp import web

from ._limits import Refusal, check_message
from ._workspace_model import Ephemeral, Message, Workspace

__all__ = ["ResponseUrls"]

_USES: Final = 5
_SECONDS: Final = 30 * 60


@dataclass(kw_only=True)
class _Issued:
    channel: str
    user: str
    at: float
    source: str | None = None
    """The ts of the message clicked (None for a slash command)."""
    uses: int = 0


class ResponseUrls:
    """The response URLs of one workspace, under `base()` (`.../api/response/<id>`; the port
    is known once LocalSlack listens)."""

    def __init__(self, workspace: Workspace, base: Callable[[], str]) -> None:
        self.workspace = workspace
        self._base = base
        self._issued: dict[str, _Issued] = {}

    def issue(self, channel: str, user: str, *, source: str | None = None) -> str:
        """A new response URL for what `user` did in `channel` (on message `source`)."""
        key = uuid.uuid4().hex
        self._issued[key] = _Issued(
            channel=channel, user=user, at=self.workspace.clock(), source=source
        )
        return f"{self._base()}{key}"

    async def handle(self, request: web.Request) -> web.Response:
        ws = self.workspace
        issued = self._issued.get(request.match_info["key"])
        if issued is None or issued.uses >= _USES or ws.clock() - issued.at > _SECONDS:
            return web.json_response({"ok": False, "error": "expired_url"}, status=404)
        try:
            body = json.loads(await request.text())
        except (ValueError, UnicodeDecodeError):
            return web.json_response({"ok": False, "error": "invalid_payload"}, status=400)
        text = body.get("text") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            return web.json_response({"ok": False, "error": "no_text"}, status=400)
        blocks = body.get("blocks", [])
        try:
            check_message(blocks)
        except Refusal as refusal:
            return web.json_response(refusal.body(), status=400)
        issued.uses += 1
        if body.get("replace_original") is True or body.get("delete_original") is True:
            if not await self._change_original(issued, body, text, blocks):
                issued.uses -= 1
                return web.json_response({"ok": False, "error": "message_not_found"}, status=404)
            return web.json_response({"ok": True})
        if body.get("response_type") == "in_channel":
            message = Message(
                channel=issued.channel,
                ts=ws.new_ts(),
                text=text,
                bot_id=ws.bot_id,
                user=ws.bot_user_id,
            )
            ws.messages.append(message)
            await ws.publish("message", {"channel": issued.channel, **message.to_api()})
        else:
            ephemeral = Ephemeral(
                channel=issued.channel, user=issued.user, text=text, message_ts=ws.new_ts()
            )
            ws.ephemerals.append(ephemeral)
            await ws.publish("ephemeral", asdict(ephemeral))
        return web.json_response({"ok": True})

    async def _change_original(
        self, issued: _Issued, body: dict[str, object], text: str, blocks: list[object]
    ) -> bool:
        """Replace or delete the message clicked; False when there is none (a command's URL, or
        the message is gone)."""
        ws = self.workspace
        if issued.source is None:
            return False
        delete = body.get("delete_original") is True
        shown = ws.find_ephemeral(issued.user, issued.source)
        if shown is not None:
            if delete:
                ws.ephemerals.remove(shown)
            else:
                shown.text = text
                shown.blocks = [b for b in blocks if isinstance(b, dict)]
            await ws.publish("ephemeral", asdict(shown))
            return True
        message = ws.message(issued.channel, issued.source)
        if message is None:
            return False
        where = {"channel": message.channel, "ts": message.ts}
        if delete:
            ws.messages.remove(message)
            await ws.publish("message_deleted", where)
            return True
        message.text = text
        message.blocks = [b for b in blocks if isinstance(b, dict)]
        message.edited = True
        await ws.publish("message_updated", {"channel": message.channel, **message.to_api()})
        return True
