"""What Slack sends the bot when people act in the workspace: event envelopes for their messages,
and the `block_actions` and `view_submission` payloads of their clicks and modal submissions."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ._workspace_model import Message, Workspace

__all__ = [
    "block_actions",
    "event_callback",
    "home_block_actions",
    "message_events",
    "payload_user",
    "slash_command",
    "view_submission",
]


def message_events(workspace: Workspace, message: Message) -> list[dict[str, Any]]:
    """The events for a person's message to an app subscribed to `app_mention`,
    `message.channels`, `message.im` and `message.mpim`."""
    chan = workspace.channels[message.channel]
    base: dict[str, Any] = {
        "user": message.user,
        "text": message.text,
        "ts": message.ts,
        "channel": message.channel,
        "event_ts": message.ts,
    }
    if message.thread_ts:
        base["thread_ts"] = message.thread_ts
    events = []
    if not chan.is_im and f"<@{workspace.bot_user_id}>" in message.text:
        events.append({"type": "app_mention", **base})
    channel_type = "im" if chan.is_im else "mpim" if chan.is_mpim else "channel"
    if chan.is_private:
        channel_type = "group"  # Slack's name for a private channel's messages
    events.append({"type": "message", "channel_type": channel_type, **base})
    return events


def event_callback(
    workspace: Workspace, event: dict[str, Any], *, event_id: str | None
) -> dict[str, Any]:
    """An `event_callback` envelope around `event`, as the Events API delivers it."""
    return {
        "token": "legacy-verification-token",
        "team_id": workspace.team_id,
        "api_app_id": workspace.api_app_id,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or workspace.new_event_id(),
        "event_time": int(time.time()),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": workspace.team_id,
                "user_id": workspace.bot_user_id,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def payload_user(workspace: Workspace, user: str) -> dict[str, Any]:
    """The `user` of an interactivity payload: the person who acted."""
    name = workspace.users[user].name if user in workspace.users else user
    return {"id": user, "username": name, "name": name, "team_id": workspace.team_id}


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


def block_actions(
    workspace: Workspace,
    user: str,
    message_ts: str,
    action_id: str,
    *,
    value: str | None,
    selected: str | list[str] | None,
    channel: str | None,
    response_url: str,
) -> dict[str, Any]:
    """A `block_actions` payload for `user` acting on a stored message (see
    `LocalSlack.block_actions_payload`); it issues a trigger and remembers what they selected."""
    message = (
        workspace.message(channel, message_ts) if channel else workspace.find_message(message_ts)
    )
    if message is None:
        raise KeyError(f"no message with ts {message_ts!r}")
    state_key = (message.channel, message.ts, user)
    action = _action(workspace, message.blocks, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    container: dict[str, Any] = {
        "type": "message",
        "message_ts": message.ts,
        "channel_id": message.channel,
        "is_ephemeral": False,
    }
    if message.thread_ts:
        container["thread_ts"] = message.thread_ts
    return {
        "type": "block_actions",
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": container,
        "trigger_id": trigger_id,
        "team": {"id": workspace.team_id, "domain": "local"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": message.channel, "name": workspace.channels[message.channel].name},
        "message": {**message.to_api()},
        "state": {"values": workspace.selections.get(state_key, {})},
        "response_url": response_url,
        "actions": [action],
    }


def home_block_actions(
    workspace: Workspace,
    user: str,
    action_id: str,
    *,
    value: str | None,
    selected: str | list[str] | None,
    block_prefix: str = "",
) -> dict[str, Any]:
    """A `block_actions` payload for `user` acting in their App Home view (the last one the app
    published for them): a `view` container and the view, and no channel or message, as Slack
    sends a click in the Home tab. `block_prefix` picks among controls of one action id (one
    per request) by the start of their block id."""
    view = workspace.home_views.get(user)
    if view is None:
        raise KeyError(f"no Home view was published for {user!r}")
    state_key = ("", "home", user)
    shown = [
        block
        for block in view.get("blocks", [])
        if str(block.get("block_id", "")).startswith(block_prefix)
    ]
    action = _action(workspace, shown, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    view_id = f"VHOME{user}"
    return {
        "type": "block_actions",
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": {"type": "view", "view_id": view_id},
        "trigger_id": trigger_id,
        "team": {"id": workspace.team_id, "domain": "local"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": {
            "id": view_id,
            "team_id": workspace.team_id,
            "app_id": workspace.api_app_id,
            "bot_id": workspace.bot_id,
            # Slack sends these empty for a view published without them.
            "callback_id": "",
            "private_metadata": "",
            "external_id": "",
            **view,
            "state": {"values": workspace.selections.get(state_key, {})},
        },
        "actions": [action],
    }


def view_submission(
    workspace: Workspace, user: str, view_id: str, values: Mapping[str, Any]
) -> dict[str, Any]:
    """A `view_submission` payload for `user` submitting an open modal (see
    `LocalSlack.view_submission_payload`)."""
    opened = workspace.open_view(user, view_id)
    state: dict[str, dict[str, Any]] = {}
    for block in opened.view.get("blocks", []):
        if block.get("type") != "input":
            continue
        block_id = str(block.get("block_id", ""))
        element = block.get("element", {})
        state[block_id] = {
            str(element.get("action_id", "")): _input_state(element, values.get(block_id))
        }
    unknown = set(values) - set(state)
    if unknown:
        raise KeyError(f"view {view_id!r} has no input blocks {sorted(unknown)!r}")
    view = {
        "id": opened.id,
        "team_id": workspace.team_id,
        "type": "modal",
        "hash": opened.hash,
        "app_id": workspace.api_app_id,
        "bot_id": workspace.bot_id,
        **opened.view,
        "state": {"values": state},
    }
    return {
        "type": "view_submission",
        "team": {"id": workspace.team_id, "domain": "local"},
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "trigger_id": workspace.new_trigger_id(),
        "view": view,
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def _action(
    workspace: Workspace,
    blocks: list[dict[str, Any]],
    state_key: tuple[str, str, str],
    user: str,
    action_id: str,
    value: str | None,
    selected: str | list[str] | None,
) -> dict[str, Any]:
    """The `actions[0]` of a click on the element `action_id` of `blocks`; what a select picks
    is remembered as the surface's state under `state_key`."""
    block, element = _find_element(blocks, action_id, value)
    action: dict[str, Any] = {
        "action_id": action_id,
        "block_id": block.get("block_id", ""),
        "type": element["type"],
        "action_ts": f"{time.time():.6f}",
    }

    def remember(state: dict[str, Any]) -> None:
        values = workspace.selections.setdefault(state_key, {})
        values.setdefault(str(block.get("block_id", "")), {})[action_id] = state

    kind = element["type"]
    if kind == "button":
        action["value"] = element.get("value", "") if value is None else value
        action["text"] = element.get("text", {})
    elif kind in {"static_select", "radio_buttons", "external_select"}:
        if selected is None or isinstance(selected, list):
            raise ValueError(f"{kind} needs one `selected` option")
        option = _find_option(element, selected)
        action["selected_option"] = option
        remember({"type": kind, "selected_option": option})
    elif kind in {"multi_static_select", "checkboxes"}:
        picks = [selected] if isinstance(selected, str) else list(selected or [])
        options = [_find_option(element, pick) for pick in picks]
        action["selected_options"] = options
        remember({"type": kind, "selected_options": options})
    else:
        raise ValueError(f"LocalSlack cannot act on a {kind!r} element")
    return action


def _elements(blocks: list[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    for block in blocks:
        if block.get("type") == "actions":
            for element in block.get("elements", []):
                yield block, element
        elif block.get("type") in {"section", "input"}:
            element = block.get("accessory") or block.get("element")
            if element:
                yield block, element


def _find_element(
    blocks: list[dict[str, Any]], action_id: str, value: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    found = [(b, e) for b, e in _elements(blocks) if e.get("action_id") == action_id]
    if len(found) > 1 and value is not None:
        found = [(b, e) for b, e in found if e.get("value") == value] or found
    if not found:
        ids = sorted({str(e.get("action_id")) for _, e in _elements(blocks)})
        raise KeyError(f"no element with action_id {action_id!r}; the message has {ids!r}")
    return found[0]


def _find_option(element: Mapping[str, Any], pick: str) -> dict[str, Any]:
    options = [*element.get("options", [])]
    for group in element.get("option_groups", []):
        options.extend(group.get("options", []))
    for option in options:
        if option.get("value") == pick or option.get("text", {}).get("text") == pick:
            return dict(option)
    raise KeyError(f"{element.get('type')} {element.get('action_id')!r} offers no option {pick!r}")


def _input_state(element: Mapping[str, Any], value: Any) -> dict[str, Any]:
    kind = str(element.get("type"))
    if kind in {"plain_text_input", "email_text_input", "url_text_input", "number_input"}:
        return {"type": kind, "value": None if value is None else str(value)}
    if kind == "datepicker":
        return {"type": kind, "selected_date": value}
    if kind in {"static_select", "radio_buttons"}:
        option = None if value is None else _find_option(element, str(value))
        return {"type": kind, "selected_option": option}
    if kind in {"multi_static_select", "checkboxes"}:
        picks = [] if value is None else [value] if isinstance(value, str) else list(value)
        return {"type": kind, "selected_options": [_find_option(element, p) for p in picks]}
    raise ValueError(f"LocalSlack cannot fill a {kind!r} input")
