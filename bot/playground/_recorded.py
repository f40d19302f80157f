"""The payloads Slack recorded or documented (`recorded/*.json`, each naming its source), and the
parts every payload built from them shares: the team, the person who acted, a view shown back.

Each payload LocalSlack sends starts from one of these and fills in this workspace's values, so a
field Slack sends is sent here too, whether or not handback reads it;
`tests/playground/test_recorded_payloads.py` checks every key is kept.
"""

from __future__ import annotations

import copy
import functools
import json
import typing
from collections.abc import Mapping
from importlib import resources
from typing import Any, Literal

from ._workspace_model import Workspace

__all__ = ["RECORDED", "Recorded", "payload_user", "recorded", "team", "view_shown"]

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


def team(workspace: Workspace) -> dict[str, Any]:
    """The `team` of an interactivity payload."""
    return {**recorded("view_submission")["team"], "id": workspace.team_id, "domain": "local"}


def view_shown(
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


def payload_user(workspace: Workspace, user: str) -> dict[str, Any]:
    """The `user` of an interactivity payload: the person who acted."""
    name = workspace.users[user].name if user in workspace.users else user
    template = recorded("view_submission")["user"]
    return {**template, "id": user, "username": name, "name": name, "team_id": workspace.team_id}
