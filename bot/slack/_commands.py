"""Slash commands: a tool run directly by a person (`Tool(fn, command="/deploy")`).

The web side reads the command (`read_command`: no I/O, the tool and its text parsed into
arguments). A command it can run is recorded in the inbox (one record per `trigger_id`) before
the ack. One whose text does not make valid arguments comes with a form (`CommandCheck.form`, a
modal pre-filled with what the text gave) that the web side opens with the command's trigger;
if Slack does not open it, and for an unknown command, the ack itself answers, ephemerally, with
the reason and the usage. A submitted form is checked before its ack, without a store read
(`read_form_submission`: the form carries where it came from), and recorded as the same command
work, once per view. The worker side (`Commands.run`) posts a message in the channel saying who
ran what and runs the tool in that message's thread (`Agent.call_tool`): the approval card and
the result land there, and the person who typed the command is the requester.

A command's text is secret-bearing (Slack shows it to nobody but whoever typed it): what is
posted, audited or kept in the run's transcript is the command as its parsed arguments, with
secret-looking values and the tool's `redact=` hidden (`shown_command`), never the text itself;
only the tool gets the real values.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from dataclasses import dataclass
from typing import Any

import blocks
from state import AuditEntry, AuditLog

from .. import Agent, Tool
from .._redact import redact
from .._tool import ArgumentsError
from ._chat import Chat, escape
from ._conversation import Conversations
from ._turns import Thread
from ._worker import Work

__all__ = [
    "CommandCheck",
    "Commands",
    "FormCheck",
    "read_command",
    "read_form_submission",
    "shown_command",
]

log = logging.getLogger("handback.slack")

_USER_ID = re.compile(r"[UW][A-Z0-9]{1,39}")


@dataclass(kw_only=True, frozen=True)
class CommandCheck:
    """What a command comes to: the arguments to run its tool with, or why it cannot run."""

    arguments: dict[str, Any] | None = None
    refusal: str | None = None
    """The ephemeral answer (mrkdwn) to a command that does not run (to whoever typed it:
    it may quote their text)."""
    audited: str = ""
    """What the audit says of a refused command: the command as `shown_command` shows it and
    why, never its text (the reason above may quote it)."""
    form: dict[str, Any] | None = None
    """The modal to open instead of the refusal: the tool's form, pre-filled with what the
    text gave; None when the command is unknown or its parameters do not fit a modal."""


def read_command(agent: Agent, body: dict[str, Any]) -> CommandCheck:
    """Check a command against the agent's tools: an unknown command, or text that does not
    make valid arguments, is refused with the usage (and for the latter, a form to fill in
    instead); never an exception."""
    command = str(body.get("command") or "")
    tool = agent.commands.get(command)
    if tool is None:
        known = ", ".join(f"`{c}`" for c in sorted(agent.commands)) or "none"
        return CommandCheck(
            refusal=f"`{escape(command)}` is not one of my commands (mine: {known}).",
            audited=f"{command[:100]}: not one of my commands",
        )
    usage = blocks.command_usage(command, tool.parameters, tool.description)
    text = str(body.get("text") or "")
    try:
        arguments = blocks.parse_command(text, tool.parameters)
        # The tool's own validation too, so the run never starts with arguments it refuses.
        tool.parse_arguments(json.dumps(arguments))
    except (blocks.InvalidAnswer, ArgumentsError) as error:
        problem = escape(str(error))
        origin = blocks.CommandOrigin(
            command=command, channel=str(body["channel_id"]), user=str(body["user_id"])
        )
        form = blocks.render_command_modal(
            origin, tool.parameters, blocks.parse_partial(text, tool.parameters), problem=problem
        )
        shown = shown_command(command, tool, blocks.parse_partial(text, tool.parameters))
        return CommandCheck(
            refusal=f"{problem}\n{usage}",
            form=form,
            audited=f"{shown}: its text does not make valid arguments",
        )
    return CommandCheck(arguments=arguments)


@dataclass(kw_only=True, frozen=True)
class FormCheck:
    """What a submitted command form comes to: work to record, or what to show in the form."""

    item: dict[str, Any] | None = None
    """The `command` work to record (its payload names the arguments, not a text)."""
    dedupe: str | None = None
    """One run per form: Slack may deliver a submission again."""
    errors: dict[str, str] | None = None
    """Inline errors by block id (`response_action: errors`); nothing is recorded."""
    refusal: str | None = None
    """Why the submission is refused, for the audit (it is also shown inline)."""
    retry_block: str | None = None
    """The input block under which to ask for a retry when recording fails."""


def _first_input(body: dict[str, Any]) -> str | None:
    view = body.get("view")
    found = view.get("blocks") if isinstance(view, dict) else None
    for block in found if isinstance(found, list) else ():
        if isinstance(block, dict) and block.get("type") == "input":
            block_id = block.get("block_id")
            if isinstance(block_id, str) and block_id:
                return block_id
    return None


def _refused(reason: str, block: str | None) -> FormCheck:
    return FormCheck(refusal=reason, errors={block: reason[:150]} if block else None)


def read_form_submission(agent: Agent, body: dict[str, Any], *, team: str | None) -> FormCheck:
    """Check a submitted command form before its ack (pure, so it needs no store): it must
    come from the app's workspace (`team`, None when unknown: refused), the submitter must be
    who typed the command, and the values must make valid arguments."""
    first = _first_input(body)
    try:
        submission = blocks.parse_command_submission(body)
    except blocks.InvalidAnswer as error:
        return _refused(str(error), first)
    origin = submission.origin
    if team is None or not submission.teams or any(t != team for t in submission.teams):
        return _refused("This form does not come from this app's workspace.", first)
    if submission.user_id != origin.user:
        return _refused("Only the person who typed the command can submit its form.", first)
    tool = agent.commands.get(origin.command)
    if tool is None:
        return _refused(f"`{origin.command}` is no longer one of my commands.", first)
    try:
        arguments = blocks.arguments_from_submission(tool.parameters, submission)
        tool.parse_arguments(json.dumps(arguments))
    except blocks.InvalidAnswer as error:
        if error.errors:
            return FormCheck(errors=error.errors)
        return FormCheck(errors={first: str(error)[:150]} if first else None)
    except ArgumentsError as error:
        return FormCheck(errors={first: str(error)[:150]} if first else None)
    payload = {
        "command": origin.command,
        "user_id": origin.user,
        "channel_id": origin.channel,
        "arguments": arguments,
    }
    return FormCheck(
        item={"payload": payload},
        dedupe=f"command-form:{submission.view_id}",
        retry_block=first,
    )


async def audit_refusal(store: AuditLog, *, user: str | None, detail: str, at: float) -> None:
    """The audit entry of a refused command or command form (best effort: the person was
    already answered); `detail` says what and why without the command's text."""
    try:
        await store.audit(
            AuditEntry(at=at, action="refused", user=user or None, detail=f"command {detail[:600]}")
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
        # Checked again: the agent may have changed since the command was recorded.
        if "arguments" in body:
            arguments, refusal = _form_arguments(self.agent, command, body["arguments"])
        else:
            check = read_command(self.agent, body)
            arguments, refusal = check.arguments, check.refusal
        if arguments is None:
            await self.chat.ephemeral(channel, user, refusal or "")
            return
        tool = self.agent.commands[command]
        if tool.name not in self.agent.tools_in(channel):
            # The channel's tool set is a hard boundary: refused before anything is posted.
            await self.chat.ephemeral(channel, user, f"`{command}` is not offered in this channel.")
            return
        # Posted, and kept as the run's prompt: never the text itself, which may hold a secret.
        typed = shown_command(command, tool, arguments)
        who = f"<@{user}>" if _USER_ID.fullmatch(user) else escape(user)
        posted = await self.chat.try_post(channel, f"{who} ran {escape(typed)}")
        if posted.kind == "refused":
            await self._not_posted(body, posted.value, command)
            return
        thread = Thread(channel=channel, thread_ts=posted.value, requester=user)
        await self.conversations.call_tool(
            thread,
            tool=tool.name,
            arguments=arguments,
            text=typed,
            run_id=work.run_id("command"),
        )

    async def _not_posted(self, body: dict[str, Any], code: str, command: str) -> None:
        """The command could not be posted in its channel, so nothing ran: say so to the person
        who typed it. Where the bot is not a member, only the command's `response_url` reaches
        them (an ephemeral message needs membership too)."""
        user, channel = str(body["user_id"]), str(body["channel_id"])
        if code in _NOT_A_MEMBER:
            text = (
                "I am not in this channel, so nothing ran. Add me with `/invite` and my name "
                f"(or from the channel's settings -> Integrations -> Add apps), then run "
                f"`{escape(command)}` again."
            )
        else:
            text = f"I could not post in this channel (Slack said {escape(code)}), so nothing ran."
        response_url = body.get("response_url")
        if isinstance(response_url, str) and await self.chat.respond(response_url, text):
            return
        await self.chat.ephemeral(channel, user, text)


_NOT_A_MEMBER = frozenset({"not_in_channel", "channel_not_found"})
"""What `chat.postMessage` answers where the bot is not a member (`channel_not_found` in a
private channel it cannot see)."""


def _form_arguments(
    agent: Agent, command: str, arguments: Any
) -> tuple[dict[str, Any] | None, str | None]:
    """`(arguments, None)` when a recorded form's arguments still fit the command's tool, else
    `(None, why)`."""
    tool = agent.commands.get(command)
    if tool is None:
        return None, f"`{escape(command)}` is no longer one of my commands, so nothing ran."
    try:
        if not isinstance(arguments, dict):
            raise ArgumentsError("arguments must be a JSON object")
        tool.parse_arguments(json.dumps(arguments))
    except ArgumentsError as error:
        return None, f"{escape(str(error))}, so nothing ran."
    return arguments, None


def shown_command(command: str, tool: Tool, arguments: dict[str, Any]) -> str:
    """The command as it could have been typed, `name=value` for each argument, with
    secret-looking (and the tool's `redact=`) values hidden: what is posted in the channel,
    audited and kept in the transcript."""
    shown = redact(arguments, tool.redact)
    words = [
        f"{name}={shlex.quote(value if isinstance(value, str) else json.dumps(value))}"
        for name, value in shown.items()
    ]
    return " ".join([command, *words])
