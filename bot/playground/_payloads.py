"""What Slack sends the bot besides clicks and modals: the events of people's messages (in
`event_callback` envelopes), of the stop button and the App Home tab, the fields of their slash
commands, and the URL checks of a Request URL.

Each starts from the payload Slack recorded or documented (`_recorded`). The payloads of clicks
and modals (`_interactive`) and the recorded templates are re-exported here for the tests that
import them from this module.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from ._interactive import block_actions, home_block_actions, view_closed, view_submission
from ._recorded import RECORDED, Recorded, payload_user, recorded, view_shown

# The recorded payloads' loader, for the test that checks each names its source.
from ._recorded import _load as _load
from ._workspace_model import Message, Workspace

__all__ = [
    "RECORDED",
    "Recorded",
    "agent_session_stopped",
    "app_home_opened",
    "block_actions",
    "event_callback",
    "home_block_actions",
    "message_events",
    "payload_user",
    "recorded",
    "slash_command",
    "ssl_check",
    "url_verification",
    "view_closed",
    "view_submission",
]


def _rich_text(text: str) -> list[dict[str, Any]]:
    """The `rich_text` block Slack's clients attach to what a person types (Slack keeps the
    text in `text` as well; handback reads that)."""
    return [
        {
            "type": "rich_text",
            "block_id": uuid.uuid4().hex[:5],
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}
            ],
        }
    ]


def message_events(workspace: Workspace, message: Message) -> list[dict[str, Any]]:
    """The events for a person's message to an app subscribed to `app_mention`,
    `message.channels`, `message.im` and `message.mpim`."""
    chan = workspace.channels[message.channel]
    values: dict[str, Any] = {
        "client_msg_id": str(uuid.uuid4()),
        "user": message.user,
        "text": message.text,
        "ts": message.ts,
        "team": workspace.team_id,
        "blocks": _rich_text(message.text),
        "channel": message.channel,
        "event_ts": message.ts,
    }
    if message.thread_ts:
        parent = workspace.message(message.channel, message.thread_ts)
        values["thread_ts"] = message.thread_ts
        values["parent_user_id"] = (parent.user if parent else None) or message.user
    events = []
    if not chan.is_im and f"<@{workspace.bot_user_id}>" in message.text:
        mention = recorded("app_mention")
        events.append({**mention, **values, "type": "app_mention"})
    channel_type = "im" if chan.is_im else "mpim" if chan.is_mpim else "channel"
    if chan.is_private:
        channel_type = "group"  # Slack's name for a private channel's messages
    template = recorded("message_in_thread" if message.thread_ts else "message")
    events.append({**template, **values, "type": "message", "channel_type": channel_type})
    return events


def event_callback(
    workspace: Workspace, event: dict[str, Any], *, event_id: str | None
) -> dict[str, Any]:
    """An `event_callback` envelope around `event`, as the Events API delivers it."""
    envelope = recorded("event_callback")
    authorization = {
        **envelope["authorizations"][0],
        "team_id": workspace.team_id,
        "user_id": workspace.bot_user_id,
    }
    return {
        **envelope,
        "token": "legacy-verification-token",
        "team_id": workspace.team_id,
        "context_team_id": workspace.team_id,
        "api_app_id": workspace.api_app_id,
        "event": event,
        "event_id": event_id or workspace.new_event_id(),
        "event_time": int(time.time()),
        "authorizations": [authorization],
        "event_context": f"4-{uuid.uuid4().hex}",
    }


def agent_session_stopped(
    user: str, channel: str, thread_ts: str, *, stopped: list[str], event_ts: str
) -> dict[str, Any]:
    """The `agent_session_stopped` event of a press of the stop button."""
    return {
        **recorded("agent_session_stopped"),
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "streaming_message_ts": stopped,
        "event_ts": event_ts,
    }


def app_home_opened(workspace: Workspace, user: str, *, event_ts: str) -> dict[str, Any]:
    """The `app_home_opened` event of `user` opening the Home tab; the view Slack shows them
    comes with it if the app published one."""
    event = recorded("app_home_opened")
    template = event.pop("view")
    event.update(user=user, channel=workspace.dm_channel(user), tab="home", event_ts=event_ts)
    if user in workspace.home_views:
        event["view"] = view_shown(workspace, template, f"VHOME{user}", workspace.home_views[user])
    return event


def url_verification(challenge: str) -> dict[str, Any]:
    """The `url_verification` Slack sends when an Events Request URL is saved."""
    return {**recorded("url_verification"), "challenge": challenge}


def ssl_check() -> dict[str, str]:
    """The form Slack POSTs to check a slash command's Request URL."""
    return {**recorded("ssl_check"), "token": "legacy-verification-token"}


def slash_command(
    workspace: Workspace,
    user: str,
    channel: str,
    command: str,
    text: str,
    *,
    trigger_id: str,
    response_url: str,
) -> dict[str, str]:
    """The fields of a slash command, as Slack form-encodes them in its POST."""
    person = workspace.users[user].name if user in workspace.users else user
    place = workspace.channels[channel].name if channel in workspace.channels else channel
    return {
        **recorded("slash_command"),
        "token": "local-verification-token",
        "team_id": workspace.team_id,
        "team_domain": "localslack",
        "channel_id": channel,
        "channel_name": place,
        "user_id": user,
        "user_name": person,
        "command": command,
        "text": text,
        "api_app_id": workspace.api_app_id,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id,
    }
