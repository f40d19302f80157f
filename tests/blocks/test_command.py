"""Reading a slash command's text as a tool's arguments, and its usage line."""

from __future__ import annotations

import random
from typing import Any

import pytest

from blocks import CommandError, command_usage, parse_command

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "service": {"enum": ["api", "web"], "type": "string"},
        "count": {"type": "integer", "minimum": 1},
        "force": {"type": "boolean", "default": False},
        "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
    },
    "required": ["service", "count"],
}


@pytest.mark.parametrize(
    ("text", "arguments"),
    [
        ("api 3", {"service": "api", "count": 3}),
        ("count=2 web", {"service": "web", "count": 2}),
        ("web 1 yes a,b", {"service": "web", "count": 1, "force": True, "tags": ["a", "b"]}),
        (
            "web 1 force=false tags='[\"x y\"]'",
            {"service": "web", "count": 1, "force": False, "tags": ["x y"]},
        ),
    ],
)
def test_words_fill_parameters_in_order_and_by_name(text: str, arguments: dict[str, Any]) -> None:
    assert parse_command(text, SCHEMA) == arguments


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Missing `service`, `count`."),
        ("api", "Missing `count`."),
        ("api 0", "`count`: "),
        ("api x", "`count`: Enter a whole number."),
        ("moon 1", "`service`: Choose one of the options."),
        ("api 1 no a b", "One word too many: `b`."),
        ("api 1 nope=1", "There is no parameter `nope`."),
        ("api 1 count=2", "`count` is given twice."),
        ("api '1", "A quote is not closed."),
    ],
)
def test_what_cannot_be_arguments_says_why(text: str, message: str) -> None:
    with pytest.raises(CommandError) as caught:
        parse_command(text, SCHEMA)
    assert str(caught.value).startswith(message)


def test_the_usage_line_shows_required_and_optional_parameters() -> None:
    usage = command_usage("/scale", SCHEMA, "Scale a service.\nMore text.")
    assert usage == (
        "Usage: `/scale &lt;service: api|web&gt; &lt;count: integer&gt; [force=false] "
        "[tags=...]`\nScale a service."
    )


_HOSTILE = "ab 1=,'\"<>&`*\\\n\t\u202e\u200b{}[]éß-_"


@pytest.mark.parametrize("seed", range(300))
def test_hostile_text_is_arguments_or_a_command_error(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(_HOSTILE) for _ in range(rng.randrange(0, 40)))
    try:
        arguments = parse_command(text, SCHEMA)
    except CommandError as error:
        assert "<" not in str(error) and "\n" not in str(error)
    else:
        assert set(arguments) <= set(SCHEMA["properties"])
