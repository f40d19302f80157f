"""What Slack refuses in the messages, views and streams an app sends: the one table of limits
LocalSlack enforces, each with where Slack documents it, and the checks that apply it.

Block Kit's own limits (a section's 3,000 characters, a select's 100 options, a modal title's 24
characters, a button's 75, ...) are checked by slack_sdk's models (`slack_sdk.models`, which
carry Slack's documented figures), walked through every nested element; the table holds the
limits those models do not check. Refusals answer as Slack does: `invalid_blocks` for messages,
`invalid_arguments` for views, each with `response_metadata.messages` pointing at the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal, assert_never

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

__all__ = [
    "LIMITS",
    "Limit",
    "Refusal",
    "ValidateKind",
    "check_message",
    "check_view",
    "limit",
    "validate",
]


@dataclass(frozen=True, kw_only=True)
class Limit:
    """One limit Slack documents, and the error it answers past it."""

    name: str
    figure: int
    error: str
    source: str
    """Where Slack documents the figure."""


LIMITS: Final[tuple[Limit, ...]] = (
    Limit(
        name="message blocks",
        figure=50,
        error="invalid_blocks",
        source="docs.slack.dev/reference/block-kit/blocks: 'up to 50 blocks in each message'",
    ),
    Limit(
        name="view blocks",
        figure=100,
        error="invalid_arguments",
        source="docs.slack.dev/reference/block-kit/blocks: 'up to 100 blocks in modals or Home "
        "tabs' (slack_sdk View.blocks_max_length)",
    ),
    Limit(
        name="view bytes",
        figure=250_000,
        error="view_too_large",
        source="docs.slack.dev/reference/methods/views.open (and views.update, views.publish): "
        "view_too_large, 'the provided view is greater than 250kb'",
    ),
    Limit(
        name="chat.update text",
        figure=4_000,
        error="msg_too_long",
        # docs.slack.dev's chat.update page lists msg_too_long without a figure; the figure is
        # the one docs.slack.dev gives message text (chat.postMessage, 'Truncating content':
        # 'limit the number of characters in the text field to 4,000'), the lowest Slack
        # documents, so an update that keeps to it is never refused for its length.
        source="docs.slack.dev/reference/methods/chat.update: msg_too_long; the figure from "
        "docs.slack.dev/reference/methods/chat.postMessage, 'Truncating content' (4,000)",
    ),
    Limit(
        name="message text",
        figure=40_000,
        error="truncated",
        source="docs.slack.dev/reference/methods/chat.postMessage: 'Slack will truncate "
        "messages containing more than 40,000 characters'",
    ),
    Limit(
        name="markdown_text",
        figure=12_000,
        error="invalid_chunks",
        source="docs.slack.dev/reference/methods/chat.appendStream: markdown_text, 'Limit this "
        "field to 12,000 characters'",
    ),
)
"""The limits slack_sdk's Block Kit models do not check, by name."""

_BY_NAME: Final = {entry.name: entry for entry in LIMITS}


def limit(name: str) -> Limit:
    """The limit called `name` in `LIMITS`."""
    return _BY_NAME[name]


@dataclass(kw_only=True)
class Refusal(Exception):
    """Slack's answer to what it refuses: its error and `response_metadata.messages`."""

    error: str
    messages: list[str]
    validation: bool = False
    """An answer of `blocks.validate`, whose `errors` are objects with a pointer."""

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "error": self.error}
        if self.validation:
            out["errors"] = [_validation_error(m) for m in self.messages or [self.error]]
            return out
        if self.messages:
            # chat.* methods also repeat them as `errors`, as Slack's recorded answers show.
            if self.error == "invalid_blocks":
                out["errors"] = [m.split(" [json-pointer")[0] for m in self.messages]
            out["response_metadata"] = {"messages": self.messages}
        return out


def _message(reason: str, pointer: str) -> str:
    return f"[ERROR] {reason} [json-pointer:{pointer}]"


def _validation_error(message: str) -> dict[str, str]:
    """One of `blocks.validate`'s `errors` (docs.slack.dev/reference/methods/blocks.validate:
    `code`, `message`, `pointer`, and a `constraint` we do not model) from our message."""
    reason, _, pointer = message.removeprefix("[ERROR] ").partition(" [json-pointer:")
    return {"code": "failed_constraint", "message": reason, "pointer": pointer.rstrip("]")}


def _objects(value: Any, pointer: str) -> Iterator[tuple[JsonObject, str]]:
    """Every slack_sdk object inside `value` (itself included), with its JSON pointer."""
    if isinstance(value, JsonObject):
        yield value, pointer
        for name, child in vars(value).items():
            if not name.startswith("_"):
                yield from _objects(child, f"{pointer}/{name}")
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            yield from _objects(child, f"{pointer}/{index}")


def _block_reasons(blocks: list[Any], pointer: str) -> list[str]:
    """What slack_sdk's models find wrong in `blocks`, one message per block at most."""
    found: list[str] = []
    for index, raw in enumerate(blocks):
        where = f"{pointer}/{index}"
        try:
            parsed = Block.parse(raw) if isinstance(raw, dict) else None
            if parsed is None:
                found.append(_message("unsupported block type", where))
                continue
            for obj, at in _objects(parsed, where):
                try:
                    obj.validate_json()
                except SlackObjectFormationError as error:
                    found.append(_message(str(error), at))
                    break
        except (SlackObjectFormationError, TypeError, ValueError, KeyError, AttributeError) as e:
            found.append(_message(f"invalid block: {e}", where))
    return found


def check_message(blocks: Any) -> None:
    """Refuse `blocks` of a message (`chat.*`, a stream's closing blocks) as Slack would."""
    if not isinstance(blocks, list):
        raise Refusal(error="invalid_blocks_format", messages=[])
    most = limit("message blocks").figure
    if len(blocks) > most:
        raise Refusal(
            error="invalid_blocks",
            messages=[_message(f"must contain no more than {most} items", "/blocks")],
        )
    reasons = _block_reasons(blocks, "/blocks")
    if reasons:
        raise Refusal(error="invalid_blocks", messages=reasons)


def check_view(view: Any, *, kind: Literal["modal", "home"]) -> None:
    """Refuse a view (`views.open` / `update` / `publish`) as Slack would."""
    if not isinstance(view, dict) or view.get("type") != kind:
        raise Refusal(
            error="invalid_arguments",
            messages=[_message(f"must be of type {kind!r}", "/view/type")],
        )
    # Measured as UTF-8 JSON: slack_sdk's `\uXXXX` escapes of the wire are not the view's size.
    if len(json.dumps(view, ensure_ascii=False).encode()) > limit("view bytes").figure:
        raise Refusal(error="view_too_large", messages=[])
    found = view.get("blocks")
    if not isinstance(found, list):
        raise Refusal(
            error="invalid_arguments", messages=[_message("blocks are required", "/view/blocks")]
        )
    reasons: list[str] = []
    try:
        View(**view).validate_json()
    except SlackObjectFormationError as error:
        reasons.append(_message(str(error), "/view"))
    except (TypeError, ValueError, KeyError, AttributeError) as error:
        reasons.append(_message(f"invalid view: {error}", "/view"))
    reasons += _block_reasons(found, "/view/blocks")
    if reasons:
        raise Refusal(error="invalid_arguments", messages=reasons)


ValidateKind = Literal["blocks", "message", "view"]


def validate(kind: ValidateKind, value: Any) -> None:
    """`blocks.validate` of a blocks array, a message or a view, refused as Slack would refuse
    it where it is sent. docs.slack.dev/reference/methods/blocks.validate shows
    `invalid_blocks`; `invalid_message` and `invalid_view` for the other two are the names
    slack-morphism's client (docs.rs/slack-morphism, api/blocks.rs) expects."""
    try:
        match kind:
            case "blocks":
                check_message(value)
            case "message":
                check_message(value.get("blocks", []) if isinstance(value, dict) else None)
            case "view":
                shown = value.get("type") if isinstance(value, dict) else None
                check_view(value, kind="home" if shown == "home" else "modal")
            case _ as unreachable:
                assert_never(unreachable)
    except Refusal as refusal:
        raise Refusal(
            error=f"invalid_{kind}",
            messages=refusal.messages or [_message(refusal.error, "")],
            validation=True,
        ) from None
