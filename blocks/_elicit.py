"""The card of an MCP server's question (elicitation): what it asks, in the server's words shown
as text, and Accept (by its buttons, select or form), Decline and Cancel as three answers.

The interaction's payload holds the question as the server sent it (`message`, `schema` for a
form, `url` and `host` for URL mode); its `response_schema` says what an answer is:
`{"action": "accept", "content": {...}}`, `{"action": "decline"}` or `{"action": "cancel"}`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from state import InteractionRecord, is_elicitation

from ._choices import Choices, choices_of
from ._errors import InvalidAnswer
from ._kit import SECTION_LIMIT, context, section
from ._text import cut_mrkdwn, inline_code, to_display

__all__ = [
    "ELICITATION",
    "ElicitAction",
    "accepted",
    "elicit_choices",
    "elicitation_blocks",
    "is_live",
    "is_url_mode",
    "plain_answer",
    "requested_schema",
    "stored_choices",
]

ELICITATION: Final = "elicitation"
"""The kind of an interaction that answers an MCP server's question."""

ElicitAction = Literal["done", "decline", "cancel"]
"""What the card's own buttons send (`hb:elicit`); an accepted form comes from its inputs."""

_NAME_LIMIT: Final = 200


def is_url_mode(record: InteractionRecord) -> bool:
    return record.payload.get("mode") == "url"


def is_live(record: InteractionRecord) -> bool:
    """A question asked during the call (the older protocol): its answer is taken by the process
    holding the call, and resumes no run."""
    return record.kind == ELICITATION and record.payload.get("legacy") is True


def requested_schema(record: InteractionRecord) -> dict[str, Any]:
    """The server's `requestedSchema` for a form question ({} for URL mode)."""
    schema = record.payload.get("schema")
    return schema if isinstance(schema, dict) and not is_url_mode(record) else {}


def elicit_choices(record: InteractionRecord) -> tuple[str, Choices] | None:
    """`(property, options)` when the form asks one thing from a list (one property with an
    `enum`): buttons or a select answer it, no modal."""
    properties = requested_schema(record).get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    [(name, schema)] = properties.items()
    enum = schema.get("enum") if isinstance(schema, dict) else None
    if not isinstance(enum, list) or not enum:
        return None
    return str(name), Choices(values=tuple(enum), multiple=False)


def stored_choices(record: InteractionRecord) -> Choices | None:
    """The options a click on `record`'s card picks from: a one-enum form's for a question of
    an MCP server, else the usual ones (`choices_of`)."""
    if is_elicitation(record):
        picked = elicit_choices(record)
        return None if picked is None else picked[1]
    return choices_of(record)


def accepted(record: InteractionRecord, value: Any) -> dict[str, Any]:
    """An answer that accepts with `value`: the picked option of a one-enum form (as its
    property), or the form's object."""
    picked = elicit_choices(record)
    content = {picked[0]: value} if picked is not None else value
    return {"action": "accept", "content": content}


def plain_answer(record: InteractionRecord, action: str | None) -> dict[str, Any]:
    """The answer of the card's Done / Decline / Cancel buttons; Done only for URL mode."""
    match action:
        case "decline" | "cancel":
            return {"action": action}
        case "done" if is_url_mode(record):
            return {"action": "accept"}
        case _:
            raise InvalidAnswer("This request has no such answer.")


def elicitation_blocks(record: InteractionRecord) -> list[dict[str, Any]]:
    """Who asks and what, without controls: the server's text is shown as text."""
    blocks: list[dict[str, Any]] = []
    message = record.payload.get("message")
    if isinstance(message, str) and message.strip():
        blocks.append(section(cut_mrkdwn(message, SECTION_LIMIT)))
    server = to_display(record.payload.get("server", "?"))
    tool = to_display(record.payload.get("tool", "?"))
    lines = (
        f"*MCP server:* {inline_code(server, _NAME_LIMIT)} (tool {inline_code(tool, _NAME_LIMIT)})"
    )
    if is_url_mode(record):
        host = to_display(record.payload.get("host", ""))
        url = to_display(record.payload.get("url", ""))
        lines += f"\n*Opens:* {inline_code(host, _NAME_LIMIT)}\n{inline_code(url, 1000)}"
    blocks.append(section(lines))
    if is_live(record):
        blocks.append(
            context(
                "The server asked this during the call (an older protocol): the answer is "
                "taken only while this bot runs; after a restart the call is reported "
                "interrupted."
            )
        )
    return blocks
