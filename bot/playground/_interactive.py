"""What Slack sends the bot when people act on what it showed them: the `block_actions` payloads
of clicks on a message (an ephemeral one included) or in the App Home, and the `view_submission`
and `view_closed` payloads of their modals. Each starts from the payload Slack recorded
(`_recorded`); the element acted on and its state come from `_element_state`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._element_state import clicked_action, input_state
from ._recorded import payload_user, recorded, team, view_shown
from ._workspace_model import Ephemeral, Message, OpenedView, Workspace

__all__ = ["block_actions", "home_block_actions", "view_closed", "view_submission"]


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
    """A `block_actions` payload for `user` acting on a stored message, or on an ephemeral one
    shown to them (see `LocalSlack.block_actions_payload`); it issues a trigger and remembers
    what they selected."""
    message = (
        workspace.message(channel, message_ts) if channel else workspace.find_message(message_ts)
    )
    clicked: Message | Ephemeral | None = message or workspace.find_ephemeral(user, message_ts)
    if clicked is None:
        raise KeyError(f"no message with ts {message_ts!r}")
    ts = clicked.ts if isinstance(clicked, Message) else clicked.message_ts
    state_key = (clicked.channel, ts, user)
    template = recorded("block_actions_message")
    action = clicked_action(workspace, clicked.blocks, state_key, user, action_id, value, selected)
    trigger_id = workspace.new_trigger_id()
    workspace.triggers[trigger_id] = user
    container: dict[str, Any] = {
        **template["container"],
        "message_ts": ts,
        "channel_id": clicked.channel,
    }
    if isinstance(clicked, Ephemeral):
        container["is_ephemeral"] = True
    if clicked.thread_ts:
        container["thread_ts"] = clicked.thread_ts
    payload = {
        **template,
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "container": container,
        "trigger_id": trigger_id,
        "team": team(workspace),
        "channel": {"id": clicked.channel, "name": workspace.channels[clicked.channel].name},
        "state": {"values": workspace.selections.get(state_key, {})},
        "response_url": response_url,
        "actions": [{**template["actions"][0], **action}],
    }
    if isinstance(clicked, Message):
        # Set in the template's place for it, between `channel` and `state`, as Slack sends it.
        payload["message"] = _as_clicked(workspace, clicked, template["message"])
    else:
        # A click on an ephemeral message carries none: the app cannot read it back, nor
        # `chat.update` it; it answers through the `response_url`.
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
    action = clicked_action(workspace, shown, state_key, user, action_id, value, selected)
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
        "team": team(workspace),
        "view": {
            **view_shown(workspace, template["view"], view_id, view),
            "state": {"values": workspace.selections.get(state_key, {})},
        },
        "actions": [{**template["actions"][0], **action}],
    }


def _opened(
    workspace: Workspace, template: Mapping[str, Any], opened: OpenedView
) -> dict[str, Any]:
    return {**view_shown(workspace, template, opened.id, opened.view), "hash": opened.hash}


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
            str(element.get("action_id", "")): input_state(element, values.get(block_id))
        }
    unknown = set(values) - set(state)
    if unknown:
        raise KeyError(f"view {view_id!r} has no input blocks {sorted(unknown)!r}")
    template = recorded("view_submission")
    view = _opened(workspace, template["view"], opened)
    view["state"] = {"values": state}
    return {
        **template,
        "team": team(workspace),
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
        "team": team(workspace),
        "user": payload_user(workspace, user),
        "api_app_id": workspace.api_app_id,
        "token": "legacy-verification-token",
        "view": {**_opened(workspace, template["view"], opened), "state": {"values": {}}},
    }
