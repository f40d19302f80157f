"""What the Slack app asks of Slack: its bot scopes, events and commands, in one place.

`manifest.yml` lists the same (a test checks it), and `handback doctor` compares a token's
granted scopes with `BOT_SCOPES`, so an install from a wheel needs no manifest file.
"""

from __future__ import annotations

__all__ = ["BOT_EVENTS", "BOT_SCOPES", "COMMANDS"]

BOT_SCOPES: tuple[str, ...] = (
    "app_mentions:read",
    "chat:write",
    "im:history",
    "channels:history",
    "groups:history",
    "reactions:write",
    "usergroups:read",
    "users:read",
)
"""Bot token scopes: mentions, posting and updating cards, DMs and thread replies in public and
private channels, the "working" reaction, user groups in approver lists, user names."""

BOT_EVENTS: tuple[str, ...] = ("app_mention", "message.im", "message.channels", "message.groups")
"""Bot events the app subscribes to."""

COMMANDS: tuple[str, ...] = ()
"""Slash commands: none."""
