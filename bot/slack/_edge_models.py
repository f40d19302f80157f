"""The pydantic models of the payloads the edge lets in, besides a click's and a form's.

They type every field Bolt, the listeners or the worker read and ignore every other; a click's
and a form's models live with the code that reads them (`blocks/_slack_models.py`). The readers
here (`person_event`, `session_stopped`, `home_opened`) type an event the edge let through.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Final, Literal

from pydantic import Field, ValidationError

# The shared parts of every payload model, with the click's and the form's models.
from blocks._slack_models import Context, Envelope, Id, Model, Nested

__all__ = [
    "REASON_LIMIT",
    "EventCallback",
    "HomeCallback",
    "HomeOpened",
    "PersonCallback",
    "PersonEvent",
    "SessionStopped",
    "SlashCommand",
    "StopCallback",
    "UrlVerification",
    "home_opened",
    "misfit_reason",
    "person_event",
    "session_stopped",
]

log = logging.getLogger("handback.slack")

REASON_LIMIT: Final = 200
"""Characters of a payload's own text (a field's path, its `type`) a refusal's reason shows."""


class UrlVerification(Envelope):
    type: Literal["url_verification"]
    challenge: Annotated[str, Field(max_length=1000)]


class PersonEvent(Context):
    """A `message` or `app_mention` event: what decides whether it is a prompt, and where."""

    type: Literal["message", "app_mention"]
    user: Id | None = None
    channel: Id | None = None
    ts: Id | None = None
    thread_ts: Id | None = None
    text: str | None = None
    subtype: Id | None = None
    channel_type: Id | None = None
    bot_id: Id | None = None
    bot_profile: dict[str, Any] | None = None
    user_team: Id | None = None
    function_execution_id: Id | None = None
    bot_access_token: str | None = None
    inputs: dict[str, Any] | None = None
    message: Nested | None = None
    previous_message: Nested | None = None


class SessionStopped(Model):
    """`agent_session_stopped`: someone pressed stop on the thread's agent session."""

    type: Literal["agent_session_stopped"]
    channel: Annotated[Id, Field(min_length=1, max_length=64)]
    thread_ts: Annotated[Id, Field(min_length=1, max_length=64)]
    user: Annotated[Id, Field(min_length=1, max_length=64)]
    user_team: Id | None = None
    """The workspace of the person who pressed stop, when Slack says (a shared channel)."""
    team: Id | None = None
    streaming_message_ts: list[Id] = Field(default_factory=list)
    event_ts: Id | None = None


class StopCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: SessionStopped


def session_stopped(body: Any) -> SessionStopped | None:
    """The `agent_session_stopped` event of a body the edge let through, typed."""
    try:
        return StopCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored a stop that does not fit: %s", misfit_reason(error))
        return None


class HomeOpened(Model):
    """`app_home_opened`: someone opened one of the app's tabs (`home`, `messages`, `about`)."""

    type: Literal["app_home_opened"]
    user: Annotated[Id, Field(min_length=1, max_length=64)]
    tab: Annotated[Id, Field(max_length=64)] = ""
    channel: Id | None = None
    event_ts: Id | None = None


class HomeCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: HomeOpened


def home_opened(body: Any) -> HomeOpened | None:
    """The `app_home_opened` event of a body the edge let through, typed."""
    try:
        return HomeCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored an app_home_opened that does not fit: %s", misfit_reason(error))
        return None


class _AnyEvent(Model):
    type: str


class EventCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: _AnyEvent


class PersonCallback(Envelope):
    type: Literal["event_callback"]
    event_id: Id | None = None
    event: PersonEvent


class SlashCommand(Model):
    """A slash command, as Slack POSTs it (a form, so every field is text)."""

    command: Annotated[str, Field(pattern=r"^/[^\s]{1,80}$")]
    text: Annotated[str, Field(max_length=4000)] = ""
    user_id: Annotated[Id, Field(min_length=1, max_length=40)]
    channel_id: Annotated[Id, Field(min_length=1, max_length=40)]
    trigger_id: Annotated[Id, Field(min_length=1, max_length=200)]
    team_id: Id | None = None
    enterprise_id: Id | None = None
    api_app_id: Id | None = None
    response_url: str | None = None
    user_name: str | None = None
    channel_name: str | None = None


def misfit_reason(error: ValidationError) -> str:
    """Where a payload does not fit and why, in one short line (its first error)."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])[:REASON_LIMIT] or "payload"
    return f"{where}: {first['msg']}"


def person_event(body: Any) -> PersonEvent | None:
    """The `message` or `app_mention` event of an `event_callback` body; None (and one log
    line) when the body does not fit, so an event with fields of the wrong type is no prompt."""
    try:
        return PersonCallback.model_validate(body if isinstance(body, dict) else {}).event
    except ValidationError as error:
        log.warning("ignored an event that does not fit: %s", misfit_reason(error))
        return None
