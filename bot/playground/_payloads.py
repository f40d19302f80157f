"""What Slack sends the bot when people act in the workspace: event envelopes for their messages,
the `block_actions`, `view_submission` and `view_closed` payloads of their clicks and modals, the
fields of their slash commands, and the URL checks of a Request URL.

Each payload starts from one Slack recorded or documented (`recorded/*.json`, each naming its
source) and fills in this workspace's values, so a field Slack sends is sent here too, whether
or not handback reads it; `tests/playground/test_recorded_payloads.py` checks every key is kept.
"""

from __future__ import annotations

import copy
import functools
import json
import time
import typing
import uuid
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, Literal

from ._workspace_model import Ephemeral, Message, OpenedView, Workspace

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

Recorded = Literal[
    "agent_session_stopped",
    "app_home_opened",
    "app_mention",
    "block_actions_home",
    "block_actions_message",
    "event_callback",
    "message",
    "message_in_thread",
    "slash_command",
    "ssl_check",
    "url_verification",
    "view_closed",
    "view_submission",
]
RECORDED: tuple[Recorded, ...] = typing.get_args(Recorded)
"""Every recorded payload, by the name of its file in `recorded/`."""


@functools.cache
def _load(name: Recorded) -> tuple[str, str]:
    text = resources.files(__package__).joinpath("recorded", f"{name}.json").read_text("utf-8")
    found = json.loads(text)
    return str(found["source"]), json.dumps(found["payload"])


def recorded(name: Recorded) -> dict[str, Any]:
    """A fresh copy of the payload Slack recorded or documented for `name`."""
    return dict(json.loads(_load(name)[1]))


def _team(workspace: Workspace) -> dict[str, Any]:
    return {**recorded("view_submission")["team"], "id": workspace.team_id, "domain": "local"}


def _view(
    workspace: Workspace, template: Mapping[str, Any], view_id: str, view: Mapping[str, Any]
) -> dict[str, Any]:
    """A view as Slack shows it back: the template's fields, this workspace's ids, then what
    the app sent."""
    return {
        **copy.deepcopy(dict(template)),
        "id": view_id,
        "team_id": workspace.team_id,
        "root_view_id": view_id,
        "app_id": workspace.api_app_id,
        "app_installed_team_id": workspace.team_id,
        "bot_id": workspace.bot_id,
        **view,
    }


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
        event["view"] = _view(workspace, template, f"VHOME{user}", workspace.home_views[user])
    return event


def url_verification(challenge: str) -> dict[str, Any]:
    """The `url_verification` Slack sends when an Events Request URL is saved."""
    return {**recorded("url_verification"), "challenge": challenge}


def ssl_check() -> dict[str, str]:
    """The form Slack POSTs to check a slash command's Request URL."""
    return {**recorded("ssl_check"), "token": "legacy-verification-token"}


def payload_user(workspace: Workspace, user: str) -> dict[str, Any]:
    """The `user` of an interactivity payload: the person who acted."""
    name = workspace.users[user].name if user in workspace.users else user
    template = recorded("view_submission")["user"]
    return {**template, "id": user, "username": name, "name": name, "team_id": workspace.team_id}


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


def _as_clicked(workspace: Workspace, message: Message, template: Mapping[str, Any]) -> Any:
    """A stored message as a `block_actions` payload carries it: a bot's message names the
    app and its bot user, as Slack's do."""
    shown = {**template, "team": workspace.team_id, **message.to_api()}
    if message.bot_id:
        shown.update(app_id=workspace.api_app_id, user=message.user or workspace.bot_user_id)
    else:
        for key in ("bot_id", "app_id"):
            shown.pop(key, None)
    return shown


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
        shown = workspace.find_ephemeral(user, message_ts)
        if shown is None:
            raise KeyError(f"no message with ts {message_ts!r}")
        return _ephemeral_block_actions(
            workspace, user, shown, action_id, value, selected, response_url
        )
    state_key = (message.channel, message.ts, user)
    template = recorded("block_actions_message")
    action = _action(workspace, message.blocks, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    container: dict[str, Any] = {
        **template["container"],
        "message_ts": message.ts,
        "channel_id": message.channel,
    }
    if message.thread_ts:
        container["thread_ts"] = message.thread_ts
    return {
        **template,
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": container,
        "trigger_id": trigger_id,
        "team": _team(workspace),
        "channel": {"id": message.channel, "name": workspace.channels[message.channel].name},
        "message": _as_clicked(workspace, message, template["message"]),
        "state": {"values": workspace.selections.get(state_key, {})},
        "response_url": response_url,
        "actions": [{**template["actions"][0], **action}],
    }


def _ephemeral_block_actions(
    workspace: Workspace,
    user: str,
    shown: Ephemeral,
    action_id: str,
    value: str | None,
    selected: str | list[str] | None,
    response_url: str,
) -> dict[str, Any]:
    """A click on an ephemeral message: Slack says so in the container (`is_ephemeral`) and
    sends no `message` (the app cannot read it back, nor `chat.update` it; it answers through
    the `response_url`)."""
    state_key = (shown.channel, shown.message_ts, user)
    template = recorded("block_actions_message")
    action = _action(workspace, shown.blocks, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    container: dict[str, Any] = {
        **template["container"],
        "message_ts": shown.message_ts,
        "channel_id": shown.channel,
        "is_ephemeral": True,
    }
    if shown.thread_ts:
        container["thread_ts"] = shown.thread_ts
    payload = {
        **template,
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": container,
        "trigger_id": trigger_id,
        "team": _team(workspace),
        "channel": {"id": shown.channel, "name": workspace.channels[shown.channel].name},
        "state": {"values": workspace.selections.get(state_key, {})},
        "response_url": response_url,
        "actions": [{**template["actions"][0], **action}],
    }
    payload.pop("message", None)
    return payload


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
    template = recorded("block_actions_home")
    action = _action(workspace, shown, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    view_id = f"VHOME{user}"
    return {
        **template,
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": {**template["container"], "view_id": view_id},
        "trigger_id": trigger_id,
        "team": _team(workspace),
        "view": {
            **_view(workspace, template["view"], view_id, view),
            "state": {"values": workspace.selections.get(state_key, {})},
        },
        "actions": [{**template["actions"][0], **action}],
    }


def _opened(
    workspace: Workspace, template: Mapping[str, Any], opened: OpenedView
) -> dict[str, Any]:
    return {**_view(workspace, template, opened.id, opened.view), "hash": opened.hash}


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
    template = recorded("view_submission")
    view = _opened(workspace, template["view"], opened)
    view["state"] = {"values": state}
    return {
        **template,
        "team": _team(workspace),
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "trigger_id": workspace.new_trigger_id(),
        "view": view,
    }


def view_closed(workspace: Workspace, user: str, opened: OpenedView) -> dict[str, Any]:
    """The `view_closed` payload of `user` closing a modal the app asked to hear about."""
    template = recorded("view_closed")
    return {
        **template,
        "team": _team(workspace),
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "view": {**_opened(workspace, template["view"], opened), "state": {"values": {}}},
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
        # Slack echoes a plain_text object with `emoji` set, whether or not the app set it.
        action["text"] = {"emoji": True, **element.get("text", {})}
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
