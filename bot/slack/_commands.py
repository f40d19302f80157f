"""Slash commands: a tool run directly by a person (`Tool(fn, command="/deploy")`).

The web side reads the command (`read_command`: no I/O, the tool and its text parsed into
arguments) and answers at once, ephemerally, a command it cannot run (unknown, or arguments that
do not fit: the reason and the usage); a command it can run is recorded in the inbox (one record
per `trigger_id`) before the ack. The worker side (`Commands.run`) posts a message in the channel
saying who ran what and runs the tool in that message's thread (`Agent.call_tool`): the approval
card and the result land there, and the person who typed the command is the requester.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import blocks
from state import AuditEntry, Store

from .. import Agent
from .._tool import ArgumentsError
from ._chat import Chat, escape
from ._conversation import Conversations, Thread
from ._worker import Work

__all__ = ["CommandCheck", "Commands", "read_command"]

log = logging.getLogger("handback.slack")

_USER_ID = re.compile(r"[UW][A-Z0-9]{1,39}")


@dataclass(kw_only=True, frozen=True)
class CommandCheck:
    """What a command comes to: the arguments to run its tool with, or why it cannot run."""

    arguments: dict[str, Any] | None = None
    refusal: str | None = None
    """The ephemeral answer (mrkdwn) to a command that does not run."""


def read_command(agent: Agent, body: dict[str, Any]) -> CommandCheck:
    """Check a command against the agent's tools: an unknown command, or text that does not
    make valid arguments, is refused with the usage; never an exception."""
    command = str(body.get("command") or "")
    tool = agent.commands.get(command)
    if tool is None:
        known = ", ".join(f"`{c}`" for c in sorted(agent.commands)) or "none"
        return CommandCheck(
            refusal=f"`{escape(command)}` is not one of my commands (mine: {known})."
        )
    usage = blocks.command_usage(command, tool.parameters, tool.description)
    try:
        arguments = blocks.parse_command(str(body.get("text") or ""), tool.parameters)
        # The tool's own validation too, so the run never starts with arguments it refuses.
        tool.parse_arguments(json.dumps(arguments))
    except (blocks.InvalidAnswer, ArgumentsError) as error:
        return CommandCheck(refusal=f"{escape(str(error))}\n{usage}")
    return CommandCheck(arguments=arguments)


async def audit_refusal(store: Store, body: dict[str, Any], reason: str, *, at: float) -> None:
    """The audit entry of a refused command (best effort: the person was already answered)."""
    detail = f"{body.get('command')} {body.get('text') or ''}".strip()
    try:
        await store.audit(
            AuditEntry(
                at=at,
                action="refused",
                user=str(body.get("user_id") or "") or None,
                detail=f"command {detail[:300]}: {reason[:300]}",
            )
        )
    except Exception:
        log.warning("could not audit a refused command", exc_info=True)


class Commands:
    """Runs recorded commands (the worker side)."""

    def __init__(self, *, agent: Agent, chat: Chat, conversations: Conversations) -> None:
        self.agent = agent
        self.chat = chat
        self.conversations = conversations

    async def run(self, item: dict[str, Any], work: Work) -> None:
        body: dict[str, Any] = item["payload"]
        command, user, channel = str(body["command"]), str(body["user_id"]), str(body["channel_id"])
        check = read_command(self.agent, body)  # again: the agent may have changed since
        if check.arguments is None:
            await self.chat.ephemeral(channel, user, check.refusal or "")
            return
        tool = self.agent.commands[command]
        typed = f"{command} {body.get('text') or ''}".strip()
        who = f"<@{user}>" if _USER_ID.fullmatch(user) else escape(user)
        ts = await self.chat.post(channel, f"{who} ran {escape(typed)}")
        if ts is None:
            await self.chat.ephemeral(
                channel, user, "I could not post in this channel, so nothing ran."
            )
            return
        thread = Thread(channel=channel, thread_ts=ts, requester=user)
        await self.conversations.call_tool(
            thread,
            tool=tool.name,
            arguments=check.arguments,
            text=typed,
            run_id=work.run_id("command"),
        )
