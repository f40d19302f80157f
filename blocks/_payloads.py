"""Reading what Slack sends back when someone clicks a card or submits a modal.

These payloads are untrusted: pydantic checks the few fields we read, with Slack's own size
limits, and everything else is ignored. The result carries references (which control, which
option index), never an answer; `_answers` turns a reference into the stored value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import InvalidAnswer
from ._form import InputValue
from ._ids import (
    ACTION_ANSWER,
    ACTION_DENY_REASON,
    ACTION_EDIT,
    ACTION_INPUT,
    ACTION_LINK,
    ACTION_MORE,
    ACTION_MULTI,
    ActionName,
    CallbackName,
    parse_action_id,
    parse_block_id,
)

__all__ = [
    "CardAction",
    "CardIntent",
    "ClickOrigin",
    "CommandOrigin",
    "CommandSubmission",
    "ModalSubmission",
    "parse_block_action",
    "parse_command_submission",
    "parse_view_submission",
]

CardIntent = Literal["answer", "open_modal", "page", "selection"]
"""What the app does with a click: resume with an answer, open a modal (`views.open`), show
another page of options (`chat.update`), or nothing (a checkbox toggled before Submit)."""

_INTENTS: Final[dict[ActionName, CardIntent]] = {
    ACTION_ANSWER: "open_modal",
    ACTION_DENY_REASON: "open_modal",
    ACTION_EDIT: "open_modal",
    ACTION_MORE: "page",
    ACTION_MULTI: "selection",
    ACTION_LINK: "selection",
}

ClickOrigin = Literal["message", "home"]
"""Where a click was made: on a card (a message, in a channel), or in the app's Home tab (a
view, which Slack sends without a channel)."""

_Id = Annotated[str, Field(min_length=1, max_length=255)]
_Short = Annotated[str, Field(max_length=3000)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _User(_Model):
    id: _Id
    team_id: _Id | None = None


class _Team(_Model):
    id: _Id


class _Channel(_Model):
    id: _Id


class _Container(_Model):
    type: _Id | None = None
    """`message` for a card, `view` for a view (App Home, a modal)."""
    message_ts: _Id | None = None
    channel_id: _Id | None = None
    thread_ts: _Id | None = None


class _Message(_Model):
    ts: _Id
    thread_ts: _Id | None = None


class _Option(_Model):
    value: Annotated[str, Field(max_length=2000)]


class _Element(_Model):
    """An element's state, or a clicked action: Slack uses the same fields for both."""

    type: _Id | None = None
    value: _Short | None = None
    selected_option: _Option | None = None
    selected_options: Annotated[list[_Option], Field(max_length=10_000)] | None = None
    selected_date: Annotated[str, Field(max_length=32)] | None = None


class _Action(_Element):
    action_id: _Id
    block_id: _Id


class _State(_Model):
    values: dict[str, dict[str, _Element]] = {}


class _ActionView(_Model):
    """The view a click was made in (absent for a click on a message)."""

    type: _Id
    id: _Id | None = None
    state: _State | None = None


class _BlockActions(_Model):
    type: Literal["block_actions"]
    user: _User
    actions: Annotated[list[_Action], Field(min_length=1, max_length=25)]
    channel: _Channel | None = None
    container: _Container | None = None
    message: _Message | None = None
    state: _State | None = None
    view: _ActionView | None = None
    trigger_id: _Id | None = None
    response_url: Annotated[str, Field(max_length=2000)] | None = None


class _View(_Model):
    id: _Id | None = None
    callback_id: Literal["hb:modal", "hb:deny_modal", "hb:edit_modal"]
    private_metadata: Annotated[str, Field(min_length=1, max_length=3000)]
    state: _State = _State()


class _ViewSubmission(_Model):
    type: Literal["view_submission"]
    team: _Team | None = None
    user: _User
    view: _View


class _CommandOrigin(_Model):
    command: Annotated[str, Field(pattern=r"^/[^\s]{1,80}$")]
    channel: Annotated[str, Field(min_length=1, max_length=40)]
    user: Annotated[str, Field(min_length=1, max_length=40)]


class _CommandView(_Model):
    id: _Id
    callback_id: Literal["hb:command_modal"]
    private_metadata: Annotated[str, Field(min_length=1, max_length=3000)]
    state: _State = _State()


class _CommandSubmission(_Model):
    type: Literal["view_submission"]
    team: _Team | None = None
    user: _User
    view: _CommandView


@dataclass(kw_only=True, frozen=True)
class CardAction:
    """One click on a card, as a reference to the pending interaction it belongs to."""

    interaction_id: str
    action: ActionName
    """The base action id (`hb:option` for `hb:option:3`)."""
    intent: CardIntent
    value: str | None
    """The reference the control sent: an option index, a page number, a button's name."""
    selected: tuple[str, ...] = ()
    """Option references ticked on the card: the multi-select's state when Submit is clicked."""
    user_id: str
    channel_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None
    trigger_id: str | None = None
    """Needed to open a modal; valid for 3 seconds."""
    response_url: str | None = None
    origin: ClickOrigin = "message"
    """`home` only for a click Slack says was made in the Home tab (a `view` container, a view
    of type `home`, and no channel); everything else is a card's click and needs its channel."""


@dataclass(kw_only=True, frozen=True)
class ModalSubmission:
    """A submitted modal: whose answer, and what each of our inputs held."""

    interaction_id: str
    callback_id: CallbackName
    user_id: str
    view_id: str | None = None
    values: dict[str, InputValue] = field(default_factory=dict)
    """By block id: the `hb:input` element of each input block."""
    teams: tuple[str, ...] = ()
    """The workspaces the payload names (`team.id`, `user.team_id`): a submission counts only
    when it names the app's, and no other."""


@dataclass(kw_only=True, frozen=True)
class CommandOrigin:
    """Where a command's form came from, kept in the form (`private_metadata`) so that its
    submission can be checked and recorded without a store read. Nothing secret."""

    command: str
    channel: str
    """The channel the command was typed in: the run's thread starts there."""
    user: str
    """Who typed it: the only person whose submission counts, and the run's requester."""

    def to_metadata(self) -> str:
        return _CommandOrigin(
            command=self.command, channel=self.channel, user=self.user
        ).model_dump_json()


@dataclass(kw_only=True, frozen=True)
class CommandSubmission:
    """A submitted command form: where it came from, who submitted it, what it held."""

    origin: CommandOrigin
    user_id: str
    view_id: str
    values: dict[str, InputValue] = field(default_factory=dict)
    """By block id: the `hb:input` element of each input block."""
    teams: tuple[str, ...] = ()
    """The workspaces the payload names (`team.id`, `user.team_id`)."""


def _teams(team: _Team | None, user: _User) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for t in (team.id if team else None, user.team_id) if t))


def _input_value(element: _Element) -> InputValue:
    selected: list[str] = []
    if element.selected_option is not None:
        selected.append(element.selected_option.value)
    selected += [option.value for option in element.selected_options or ()]
    return InputValue(text=element.value, selected=tuple(selected), date=element.selected_date)


def _invalid(what: str, exc: ValidationError) -> InvalidAnswer:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "payload"
    return InvalidAnswer(f"This {what} is not one handback can read ({where}: {first['msg']}).")


def _model_input(payload: Any) -> Any:
    if not isinstance(payload, dict):
        raise InvalidAnswer("This Slack payload is not an object.")
    return payload


def parse_block_action(payload: dict[str, Any]) -> CardAction:
    """The first `hb:` action of a `block_actions` payload; `InvalidAnswer` when there is none."""
    try:
        body = _BlockActions.model_validate(_model_input(payload))
    except ValidationError as exc:
        raise _invalid("click", exc) from None
    for clicked in body.actions:
        name = parse_action_id(clicked.action_id)
        ids = parse_block_id(clicked.block_id)
        if name is None or ids is None:
            continue
        interaction_id = ids[0]
        value = clicked.value
        if clicked.selected_option is not None:
            value = clicked.selected_option.value
        container = body.container or _Container()
        if body.channel and container.channel_id and body.channel.id != container.channel_id:
            # Slack names the card's channel twice; a click that disagrees with itself is not
            # taken from either.
            raise InvalidAnswer("This click names two different channels.")
        origin = _origin(body, container)
        state = body.view.state if origin == "home" and body.view else body.state
        selected = _card_selection(state, interaction_id, clicked)
        message = body.message
        return CardAction(
            interaction_id=interaction_id,
            action=name,
            intent=_INTENTS.get(name, "answer"),
            value=value,
            selected=selected,
            user_id=body.user.id,
            channel_id=body.channel.id if body.channel else container.channel_id,
            message_ts=message.ts if message else container.message_ts,
            thread_ts=(message.thread_ts if message else None) or container.thread_ts,
            trigger_id=body.trigger_id,
            response_url=body.response_url,
            origin=origin,
        )
    raise InvalidAnswer("This button is not one of handback's.")


def _origin(body: _BlockActions, container: _Container) -> ClickOrigin:
    """`home` for a click in the Home tab, else `message`; a click that says it was made in Home
    but also names a channel or a message contradicts itself and is taken from neither."""
    in_home = container.type == "view" and body.view is not None and body.view.type == "home"
    if not in_home:
        return "message"
    if body.channel or container.channel_id or body.message or container.message_ts:
        raise InvalidAnswer("This click says it was made in App Home and in a channel.")
    return "home"


def _card_selection(state: _State | None, interaction_id: str, clicked: _Action) -> tuple[str, ...]:
    """The options ticked in this card's multi-select, from the state Slack attaches (the
    message's, or the Home view's)."""
    if clicked.selected_options is not None:
        return tuple(option.value for option in clicked.selected_options)
    if state is None:
        return ()
    selected: list[str] = []
    for block, elements in state.values.items():
        ids = parse_block_id(block)
        if ids is None or ids[0] != interaction_id:
            continue
        for action_id, element in elements.items():
            if parse_action_id(action_id) == ACTION_MULTI:
                selected += _input_value(element).selected
    return tuple(selected)


def parse_view_submission(payload: dict[str, Any]) -> ModalSubmission:
    """A `view_submission` of one of our modals; `InvalidAnswer` for anything else."""
    try:
        body = _ViewSubmission.model_validate(_model_input(payload))
    except ValidationError as exc:
        raise _invalid("form", exc) from None
    values = _state_values(body.view.state)
    return ModalSubmission(
        interaction_id=body.view.private_metadata,
        callback_id=body.view.callback_id,
        user_id=body.user.id,
        view_id=body.view.id,
        values=values,
        teams=_teams(body.team, body.user),
    )


def _state_values(state: _State) -> dict[str, InputValue]:
    values: dict[str, InputValue] = {}
    for block, elements in state.values.items():
        element = elements.get(ACTION_INPUT)
        if element is not None:
            values[block] = _input_value(element)
    return values


def parse_command_submission(payload: dict[str, Any]) -> CommandSubmission:
    """A `view_submission` of a command's form; `InvalidAnswer` for anything else."""
    try:
        body = _CommandSubmission.model_validate(_model_input(payload))
        origin = _CommandOrigin.model_validate_json(body.view.private_metadata)
    except ValidationError as exc:
        raise _invalid("form", exc) from None
    return CommandSubmission(
        origin=CommandOrigin(command=origin.command, channel=origin.channel, user=origin.user),
        user_id=body.user.id,
        view_id=body.view.id,
        values=_state_values(body.view.state),
        teams=_teams(body.team, body.user),
    )
