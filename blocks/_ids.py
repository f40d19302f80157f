"""The ids that tie a Slack control back to a pending interaction.

Every interactive block carries `block_id = "hb|<interaction_id>|<part>"`; every control has an
`action_id` starting with `hb:` (one Bolt listener on `^hb:` catches them all). Buttons that share
a block get a `:<n>` suffix because Slack wants action ids unique within a block; the base action
is the part before it. The value a control sends back is a reference (an option index, a page
number), never the answer itself.
"""

from __future__ import annotations

import re
from typing import Final, Literal, get_args

__all__ = [
    "ACTION_ANSWER",
    "ACTION_APPROVE",
    "ACTION_CANCEL",
    "ACTION_CONFIRM",
    "ACTION_DENY",
    "ACTION_DENY_REASON",
    "ACTION_EDIT",
    "ACTION_ELICIT",
    "ACTION_GRANT",
    "ACTION_INPUT",
    "ACTION_LINK",
    "ACTION_MORE",
    "ACTION_MULTI",
    "ACTION_OPTION",
    "ACTION_PATTERN",
    "ACTION_REVOKE",
    "ACTION_SELECT",
    "ACTION_SUBMIT",
    "CALLBACK_COMMAND_MODAL",
    "CALLBACK_DENY_MODAL",
    "CALLBACK_EDIT_MODAL",
    "CALLBACK_MODAL",
    "CALLBACK_PATTERN",
    "MAX_INTERACTION_ID",
    "ActionName",
    "CallbackName",
    "block_id",
    "parse_action_id",
    "parse_block_id",
    "suffixed",
]

ActionName = Literal[
    "hb:approve",
    "hb:deny",
    "hb:deny_reason",
    "hb:edit",
    "hb:grant",
    "hb:revoke",
    "hb:confirm",
    "hb:cancel",
    "hb:option",
    "hb:select",
    "hb:multi",
    "hb:submit",
    "hb:answer",
    "hb:more",
    "hb:input",
    "hb:elicit",
    "hb:link",
]
CallbackName = Literal["hb:modal", "hb:deny_modal", "hb:edit_modal", "hb:command_modal"]

ACTION_APPROVE: Final = "hb:approve"
ACTION_DENY: Final = "hb:deny"
ACTION_DENY_REASON: Final = "hb:deny_reason"
ACTION_EDIT: Final = "hb:edit"
"""Opens the form an approver edits the arguments in before approving (`editable` rules)."""
ACTION_GRANT: Final = "hb:grant"
"""Approve and give a standing grant: `hb:grant:thread` or `hb:grant:channel`, the scope as the
button's value (checked against the rule's `grants`)."""
ACTION_REVOKE: Final = "hb:revoke"
"""Revoke a standing grant from the Home tab of whoever gave it; its block id names the grant
(`hb|<grant id>|revoke`), so the click is a reference checked against the stored grant."""
ACTION_CONFIRM: Final = "hb:confirm"
ACTION_CANCEL: Final = "hb:cancel"
ACTION_OPTION: Final = "hb:option"
ACTION_SELECT: Final = "hb:select"
ACTION_MULTI: Final = "hb:multi"
ACTION_SUBMIT: Final = "hb:submit"
ACTION_ANSWER: Final = "hb:answer"
ACTION_MORE: Final = "hb:more"
ACTION_ELICIT: Final = "hb:elicit"
"""An MCP server's question answered without its form: `decline`, `cancel`, or `done` (URL
mode) as the button's value, checked against the stored interaction."""
ACTION_LINK: Final = "hb:link"
"""A link button (URL mode's Open link): Slack opens the URL and tells the app, which does
nothing with it."""
ACTION_INPUT: Final = "hb:input"
"""The action id of every input element inside a modal; the block id says which field."""

CALLBACK_MODAL: Final = "hb:modal"
CALLBACK_DENY_MODAL: Final = "hb:deny_modal"
CALLBACK_EDIT_MODAL: Final = "hb:edit_modal"
"""The edit-and-approve form; its submission approves with the edited arguments."""
CALLBACK_COMMAND_MODAL: Final = "hb:command_modal"
"""The form a slash command opens when its text does not make valid arguments."""

ACTION_PATTERN: Final = re.compile(r"^hb:")
"""What the Slack app registers its single action listener on."""
CALLBACK_PATTERN: Final = re.compile(r"^hb:(deny_|edit_|command_)?modal$")

_BLOCK_PREFIX: Final = "hb|"
_MAX_PART: Final = 16
MAX_INTERACTION_ID: Final = 255 - len(_BLOCK_PREFIX) - 1 - _MAX_PART
"""The longest interaction id whose block ids still fit Slack's 255 characters."""

_ACTIONS: Final[dict[str, ActionName]] = {name: name for name in get_args(ActionName)}


def block_id(interaction_id: str, part: str) -> str:
    """`hb|<interaction_id>|<part>`; an id too long for Slack is a developer mistake."""
    if not interaction_id or len(interaction_id) > MAX_INTERACTION_ID:
        raise ValueError(
            f"`interaction_id` must be 1..{MAX_INTERACTION_ID} characters, got {interaction_id!r}"
        )
    if len(part) > _MAX_PART or "|" in part:
        raise ValueError(f"block id part {part!r} is not a short name")
    return f"{_BLOCK_PREFIX}{interaction_id}|{part}"


def parse_block_id(value: str) -> tuple[str, str] | None:
    """`(interaction_id, part)` of a block id made by `block_id`, else None."""
    if not value.startswith(_BLOCK_PREFIX):
        return None
    interaction_id, sep, part = value[len(_BLOCK_PREFIX) :].rpartition("|")
    if not sep or not interaction_id:
        return None
    return interaction_id, part


def suffixed(action: ActionName, suffix: int | str) -> str:
    """An action id made unique within its block, e.g. `hb:option:3`."""
    return f"{action}:{suffix}"


def parse_action_id(value: str) -> ActionName | None:
    """The base action of `hb:option:3` or `hb:approve`, None for anything else."""
    parts = value.split(":")
    if len(parts) < 2:
        return None
    base = f"{parts[0]}:{parts[1]}"
    return _ACTIONS.get(base)
