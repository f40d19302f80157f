"""Block Kit for handback: cards for pending interactions, modals, and reading answers back.

Pure functions, no I/O. Ids on the wire:

- every interactive block has `block_id = "hb|<interaction_id>|<part>"` (`a` buttons, `o` option
  buttons, `s<page>` a select page, `m` a multi-select, `v` / `p<n>` / `...c<n>` modal inputs,
  `reason` the deny reason);
- every control's `action_id` starts with `hb:` (`hb:approve`, `hb:grant:<scope>`, `hb:edit`,
  `hb:deny`, `hb:deny_reason`, `hb:confirm`, `hb:cancel`, `hb:option:<n>`, `hb:select`,
  `hb:multi`, `hb:submit`, `hb:answer`, `hb:more:<page>`, `hb:elicit:<a|d|c>` (an MCP
  server's question: Done, Decline, Cancel), `hb:link` (Open link, ignored); `hb:input` inside
  modals), so one Bolt listener on `ACTION_PATTERN` catches them; option values are indexes
  into the stored options, page buttons carry the page number;
- modals use `callback_id` `hb:modal`, `hb:deny_modal` or `hb:edit_modal` (edit the arguments,
  then approve) and carry the interaction id in `private_metadata`; a slash command's form uses
  `hb:command_modal` and carries its `CommandOrigin` (command, channel, who typed it) as JSON
  there instead.

The app's flow: `parse_block_action` -> look the interaction up -> by `CardAction.intent`:
`resolve_answer` ("answer"), `render_modal` (or for `hb:edit`, `render_edit_modal`) +
`views.open` ("open_modal"), `page_from_action` + `render_card(page=...)` ("page"), or just ack
("selection"). For modals `parse_view_submission` -> `answer_from_submission`, acking
`InvalidAnswer.errors` inline. After a claim, `render(record)`.
"""

from ._answers import (
    accepts_text_reply,
    answer_from_submission,
    answer_from_text,
    page_from_action,
    resolve_answer,
)
from ._approvers import ANYONE, approver_mentions, with_note
from ._card import Message, render_card
from ._command import CommandError, command_usage, parse_command, parse_partial
from ._command_form import arguments_from_submission, render_command_modal
from ._edit import locked_arguments, render_edit_modal
from ._elicit import ELICITATION, is_live, is_url_mode
from ._errors import InvalidAnswer
from ._form import InputValue
from ._home import Decision, home_with_notice, render_home
from ._ids import (
    ACTION_ANSWER,
    ACTION_APPROVE,
    ACTION_CANCEL,
    ACTION_CONFIRM,
    ACTION_DENY,
    ACTION_DENY_REASON,
    ACTION_EDIT,
    ACTION_ELICIT,
    ACTION_GRANT,
    ACTION_INPUT,
    ACTION_MORE,
    ACTION_MULTI,
    ACTION_OPTION,
    ACTION_PATTERN,
    ACTION_REVOKE,
    ACTION_SELECT,
    ACTION_SUBMIT,
    CALLBACK_COMMAND_MODAL,
    CALLBACK_DENY_MODAL,
    CALLBACK_EDIT_MODAL,
    CALLBACK_MODAL,
    CALLBACK_PATTERN,
    ActionName,
    CallbackName,
    parse_block_id,
)
from ._modal import render_modal
from ._outcome import render, render_answered, render_closed
from ._payloads import (
    CardAction,
    CardIntent,
    ClickOrigin,
    CommandOrigin,
    CommandSubmission,
    ModalSubmission,
    parse_block_action,
    parse_command_submission,
    parse_view_submission,
)
from ._text import escape, show_hidden

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
    "ACTION_MORE",
    "ACTION_MULTI",
    "ACTION_OPTION",
    "ACTION_PATTERN",
    "ACTION_REVOKE",
    "ACTION_SELECT",
    "ACTION_SUBMIT",
    "ANYONE",
    "CALLBACK_COMMAND_MODAL",
    "CALLBACK_DENY_MODAL",
    "CALLBACK_EDIT_MODAL",
    "CALLBACK_MODAL",
    "CALLBACK_PATTERN",
    "ELICITATION",
    "ActionName",
    "CallbackName",
    "CardAction",
    "CardIntent",
    "ClickOrigin",
    "CommandError",
    "CommandOrigin",
    "CommandSubmission",
    "Decision",
    "InputValue",
    "InvalidAnswer",
    "Message",
    "ModalSubmission",
    "accepts_text_reply",
    "answer_from_submission",
    "answer_from_text",
    "approver_mentions",
    "arguments_from_submission",
    "command_usage",
    "escape",
    "home_with_notice",
    "is_live",
    "is_url_mode",
    "locked_arguments",
    "page_from_action",
    "parse_block_action",
    "parse_block_id",
    "parse_command",
    "parse_command_submission",
    "parse_partial",
    "parse_view_submission",
    "render",
    "render_answered",
    "render_card",
    "render_closed",
    "render_command_modal",
    "render_edit_modal",
    "render_home",
    "render_modal",
    "resolve_answer",
    "show_hidden",
    "with_note",
]
