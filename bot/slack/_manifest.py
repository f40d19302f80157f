"""What the Slack app asks of Slack: its bot scopes, events and commands, in one place.

`manifest.yml` lists the same (a test checks it), and `handback doctor` compares a token's
granted scopes with `BOT_SCOPES`, so an install from a wheel needs no manifest file.
"""

from __future__ import annotations

__all__ = ["BOT_EVENTS", "BOT_SCOPES", "COMMANDS", "HOME_TAB_ENABLED"]

BOT_SCOPES: tuple[str, ...] = (
    "app_mentions:read",
    "assistant:write",
    "chat:write",
    "commands",
    "im:history",
    "mpim:history",
    "channels:history",
    "groups:history",
    "channels:read",
    "groups:read",
    "mpim:read",
    "reactions:write",
    "usergroups:read",
    "users:read",
)
"""Bot token scopes: mentions, agent sessions (status, streamed answers, tasks), posting and
updating cards, slash commands, DMs, group DMs and thread replies in public and private channels,
the "working" reaction of classic messages, user groups in approver lists, the people
`handback doctor` looks up (`users.info`); `conversations.info` and `conversations.members`
(channels:read, groups:read, mpim:read) so App Home lists a private channel's or group DM's
request only for its members."""

BOT_EVENTS: tuple[str, ...] = (
    "app_mention",
    "message.im",
    "message.mpim",
    "message.channels",
    "message.groups",
    "agent_session_stopped",
    "app_home_opened",
)
"""Bot events the app subscribes to (`app_home_opened` needs no scope of its own, nor does
`views.publish`)."""

HOME_TAB_ENABLED = True
"""`features.app_home.home_tab_enabled`: App Home lists what waits on each person."""

COMMANDS: tuple[str, ...] = ("/deploy",)
"""Slash commands of the example agent (`bot/chatops.py`); an agent of your own declares its
tools' `command=` in its own manifest."""
