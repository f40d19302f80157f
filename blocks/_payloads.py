"""Reading what Slack sends back when someone clicks a card or submits a modal.

These payloads are untrusted: pydantic checks the few fields we read, with Slack's own size
limits, and everything else is ignored. The result carries references (which control, which
option index), never an answer; `_answers` turns a reference into the stored value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from pydantic import Field, ValidationError

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
from ._slack_models import (
    BlockActions,
    Container,
    Element,
    Model,
    Named,
    State,
    ViewSubmission,
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

_CALLBACKS: Final[dict[str, CallbackName]] = {
    "hb:modal": "hb:modal",
    "hb:deny_modal": "hb:deny_modal",
    "hb:edit_modal": "hb:edit_modal",
}
"""The callback ids of the modals that answer a request (a command's form is read apart)."""

_METADATA_LIMIT: Final = 3000


class _CommandOrigin(Model):
    command: Annotated[str, Field(pattern=r"^/[^\s]{1,80}$")]
    channel: Annotated[str, Field(min_length=1, max_length=40)]
    user: Annotated[str, Field(min_length=1, max_length=40)]


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


def _teams(body: ViewSubmission) -> tuple[str, ...]:
    """The workspaces a submission names; a team given as anything but an object with its id
    is no payload Slack sends, and is refused."""
    team = body.team
    if team is not None and not (isinstance(team, Named) and team.id):
        raise InvalidAnswer("This form is not one handback can read (team: not an object).")
    named = team.id if isinstance(team, Named) else None
    return tuple(dict.fromkeys(t for t in (named, body.user.team_id) if t))


def _input_value(element: Element) -> InputValue:
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
        body = BlockActions.model_validate(_model_input(payload))
    except ValidationError as exc:
        raise _invalid("click", exc) from None
    for clicked in body.actions:
        name = parse_action_id(clicked.action_id)
        ids = parse_block_id(clicked.block_id) if clicked.block_id else None
        if name is None or ids is None:
            continue
        interaction_id = ids[0]
        value = clicked.value
        if clicked.selected_option is not None:
            value = clicked.selected_option.value
        container = body.container or Container()
        channel = body.channel.id if body.channel else None
        if (body.channel is not None and not channel) or container.channel_id == "":
            # A channel named as nobody: not read as "no channel given" (which falls back on
            # the other field), so a blanked field cannot borrow the card's channel.
            raise InvalidAnswer("This click names no channel.")
        if channel and container.channel_id and channel != container.channel_id:
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
            channel_id=channel or container.channel_id,
            message_ts=(message.ts if message else None) or container.message_ts,
            thread_ts=(message.thread_ts if message else None) or container.thread_ts,
            trigger_id=body.trigger_id,
            response_url=body.response_url,
            origin=origin,
        )
    raise InvalidAnswer("This button is not one of handback's.")


def _origin(body: BlockActions, container: Container) -> ClickOrigin:
    """`home` for a click in the Home tab, else `message`; a click that says it was made in Home
    but also names a channel or a message contradicts itself and is taken from neither."""
    in_home = container.type == "view" and body.view is not None and body.view.type == "home"
    if not in_home:
        return "message"
    if body.channel or container.channel_id or body.message or container.message_ts:
        raise InvalidAnswer("This click says it was made in App Home and in a channel.")
    return "home"


def _card_selection(state: State | None, interaction_id: str, clicked: Element) -> tuple[str, ...]:
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


def _submitted(
    payload: Any, callbacks: Mapping[str, CallbackName]
) -> tuple[ViewSubmission, CallbackName, str]:
    """The `view_submission` of one of `callbacks`' views, its callback and its
    `private_metadata`."""
    try:
        body = ViewSubmission.model_validate(_model_input(payload))
    except ValidationError as exc:
        raise _invalid("form", exc) from None
    callback = callbacks.get(body.view.callback_id)
    if callback is None:
        raise InvalidAnswer("This form is not one handback can read (view.callback_id).")
    metadata = body.view.private_metadata
    if not metadata or len(metadata) > _METADATA_LIMIT:
        raise InvalidAnswer("This form is not one handback can read (view.private_metadata).")
    return body, callback, metadata


def parse_view_submission(payload: dict[str, Any]) -> ModalSubmission:
    """A `view_submission` of one of our modals; `InvalidAnswer` for anything else."""
    body, callback, metadata = _submitted(payload, _CALLBACKS)
    return ModalSubmission(
        interaction_id=metadata,
        callback_id=callback,
        user_id=body.user.id,
        view_id=body.view.id,
        values=_state_values(body.view.state),
        teams=_teams(body),
    )


def _state_values(state: State | None) -> dict[str, InputValue]:
    values: dict[str, InputValue] = {}
    for block, elements in (state.values if state else {}).items():
        element = elements.get(ACTION_INPUT)
        if element is not None:
            values[block] = _input_value(element)
    return values


def parse_command_submission(payload: dict[str, Any]) -> CommandSubmission:
    """A `view_submission` of a command's form; `InvalidAnswer` for anything else."""
    body, _, metadata = _submitted(payload, {"hb:command_modal": "hb:command_modal"})
    if not body.view.id:
        raise InvalidAnswer("This form is not one handback can read (view.id).")
    try:
        origin = _CommandOrigin.model_validate_json(metadata)
    except ValidationError as exc:
        raise _invalid("form", exc) from None
    return CommandSubmission(
        origin=CommandOrigin(command=origin.command, channel=origin.channel, user=origin.user),
        user_id=body.user.id,
        view_id=body.view.id,
        values=_state_values(body.view.state),
        teams=_teams(body),
    )
