"""The bodies of the playground page's requests, validated as any client's are (the page is one
like any other): what a person posts, clicks, submits or stops, and the inputs of a modal as
LocalSlack fills them. A body that does not validate is a `_BadRequest`."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "CloseView",
    "HomeAction",
    "HomeOpen",
    "PostAction",
    "PostMessage",
    "Stop",
    "SubmitView",
    "read_body",
    "typed",
]


class _BadRequest(Exception):
    """A request the page should not have sent: answered 400 with the reason."""


class _Edge(BaseModel):
    # The page is a client like any other: its bodies are validated, unknown keys ignored.
    model_config = ConfigDict(extra="ignore")


class PostMessage(_Edge):
    user: str
    channel: str
    text: str = Field(min_length=1, max_length=40_000)
    thread_ts: str | None = None


class _Option(_Edge):
    value: str | None = None
    text: dict[str, Any] | None = None

    def pick(self) -> str:
        """What LocalSlack finds the option by: its value, else its label."""
        if self.value is not None:
            return self.value
        return str((self.text or {}).get("text", ""))


class _Action(_Edge):
    action_id: str
    block_id: str | None = None
    type: str
    value: str | None = None
    selected_option: _Option | None = None
    selected_options: list[_Option] | None = None

    def selected(self) -> str | list[str] | None:
        """What the click picked, as `LocalSlack.click` takes it."""
        if self.selected_options is not None:
            return [o.pick() for o in self.selected_options]
        if self.selected_option is not None:
            return self.selected_option.pick()
        return None


class PostAction(_Edge):
    user: str
    channel: str
    message_ts: str
    ephemeral: bool = False
    action: _Action


class HomeOpen(_Edge):
    user: str


class HomeAction(_Edge):
    user: str
    action: _Action


class _InputState(_Edge):
    """One input element's state as the page sends it, in Slack's `state.values` shape."""

    value: str | None = None
    selected_date: str | None = None
    selected_option: _Option | None = None
    selected_options: list[_Option] | None = None


class SubmitView(_Edge):
    user: str
    view_id: str
    values: dict[str, dict[str, _InputState]] = Field(default_factory=dict)
    """Slack's `state.values` shape: block_id -> action_id -> element state."""


class Stop(_Edge):
    user: str
    channel: str
    thread_ts: str


class CloseView(_Edge):
    user: str
    view_id: str


_M = TypeVar("_M", bound=_Edge)


async def read_body(request: web.Request, model: type[_M]) -> _M:
    """The request's JSON body as `model`, or a `_BadRequest` saying why not."""
    try:
        return model.model_validate(await request.json())
    except (ValidationError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise _BadRequest(f"bad request body: {error}") from None
    except RecursionError:
        raise _BadRequest("bad request body: nested too deeply") from None


def typed(states: dict[str, _InputState]) -> str | list[str] | None:
    """One input's Slack element state as LocalSlack fills it: text, a date, option value(s)."""
    for state in states.values():
        if state.selected_options is not None:
            return [option.pick() for option in state.selected_options]
        if state.selected_option is not None:
            return state.selected_option.pick()
        for entered in (state.value, state.selected_date):
            if entered is not None:
                return entered
    return None
