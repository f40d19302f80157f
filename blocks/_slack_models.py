"""The pydantic models of the Slack payloads that carry a click or a form, one per payload: the
edge (`bot/slack/_admission.py`) checks a verified body against them before it acks, and
`_payloads` reads the same models into `CardAction` and `ModalSubmission`.

They type every field Bolt or handback reads (a wrong type anywhere Bolt looks would make it
raise before a listener runs) and ignore every other field (Slack adds fields without notice).
Strict: a number is not a string and a string is not a bool, as in Slack's own payloads.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "ID_LIMIT",
    "BlockActions",
    "Container",
    "Context",
    "Element",
    "Envelope",
    "Id",
    "Model",
    "Named",
    "Nested",
    "State",
    "SubmittedView",
    "User",
    "View",
    "ViewSubmission",
]

ID_LIMIT: Final = 255
"""Characters an id may have: Slack's longest (a `block_id`, an `action_id`) are 255 at most."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
"""What no id holds: control characters (NUL among them) and surrogates, which are no text."""


def _plain(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("an id holds a control character or is not valid text")
    return value


Id = Annotated[str, Field(max_length=ID_LIMIT), AfterValidator(_plain)]
"""An id Slack sends (user, channel, team, ts, event_id, trigger_id, action_ts, ...): short,
printable text. Anything else is refused at the edge, before it reaches a log, a store key or
a Lua script."""

_Short = Annotated[str, Field(max_length=3000)]


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)


class Named(Model):
    """A user, channel, team or enterprise given as an object."""

    id: Id | None = None


class Context(Model):
    """Fields Bolt reads to build its context, at any level it looks: the wrong type in any of
    them makes Bolt raise before a listener runs."""

    user: Id | Named | None = None
    user_id: Id | None = None
    channel: Id | Named | None = None
    channel_id: Id | None = None
    thread_ts: Id | None = None
    team: Id | Named | None = None
    team_id: Id | None = None
    enterprise: Id | Named | None = None
    enterprise_id: Id | None = None
    is_enterprise_install: bool | None = None
    authorizations: list[Context] | None = None


class Nested(Context):
    """An object Bolt looks into for the user or the thread (`message`, `item` and the like)."""


class _ResponseUrl(Model):
    response_url: str | None = None


class Envelope(Context):
    """What every payload Bolt is handed holds at its top level."""

    type: str
    is_ext_shared_channel: bool | None = None
    context_team_id: Id | None = None
    context_enterprise_id: Id | None = None
    function_execution_id: Id | None = None
    api_app_id: Id | None = None
    bot_access_token: str | None = None
    function_data: dict[str, Any] | None = None
    response_url: str | None = None
    response_urls: list[_ResponseUrl] | None = None
    message: Nested | None = None
    previous_message: Nested | None = None
    item: Nested | None = None
    assistant_thread: Nested | None = None


class User(Named):
    id: Annotated[Id, Field(min_length=1)]
    team_id: Id | None = None


class Container(Model):
    type: Id | None = None
    """`message` for a card, `view` for a view (App Home, a modal)."""
    message_ts: Id | None = None
    channel_id: Id | None = None
    thread_ts: Id | None = None


class _Message(Nested):
    ts: Id | None = None


class _Option(Model):
    value: Annotated[str, Field(max_length=2000)]


class Element(Model):
    """An element's state, or a clicked action: Slack uses the same fields for both."""

    type: Id | None = None
    value: _Short | None = None
    selected_option: _Option | None = None
    selected_options: Annotated[list[_Option], Field(max_length=10_000)] | None = None
    selected_date: Annotated[str, Field(max_length=32)] | None = None


class _Action(Element):
    action_id: Id
    block_id: Id | None = None
    action_ts: Id | None = None


class State(Model):
    values: dict[str, dict[str, Element]] = {}


class View(Model):
    """A view: the one a click was made in (App Home, a modal), or a submitted modal."""

    type: str
    """`home`, `modal`; Bolt reads it to tell workflow steps apart."""
    id: Id | None = None
    callback_id: Id | None = None
    private_metadata: Annotated[str, Field(max_length=3000)] | None = None
    blocks: list[dict[str, Any]] | None = None
    state: State | None = None
    team_id: Id | None = None
    app_installed_team_id: Id | None = None


class SubmittedView(View):
    """A submitted modal: Bolt routes it by its `callback_id`."""

    callback_id: Id


class BlockActions(Envelope):
    """`block_actions`: a click on a card, in App Home, or in a modal."""

    type: Literal["block_actions"]
    user: User
    actions: Annotated[list[_Action], Field(min_length=1, max_length=25)]
    channel: Named | None = None
    container: Container | None = None
    message: _Message | None = None
    state: State | None = None
    view: View | None = None
    trigger_id: Id | None = None
    response_url: Annotated[str, Field(max_length=2000)] | None = None


class ViewSubmission(Envelope):
    """`view_submission`: a submitted modal (an answer's form, or a command's)."""

    type: Literal["view_submission"]
    user: User
    view: SubmittedView
    trigger_id: Id | None = None
