"""The public surface of `blocks`: exports, the id scheme, and thread replies."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import blocks
from blocks import (
    ACTION_PATTERN,
    CALLBACK_PATTERN,
    InvalidAnswer,
    accepts_text_reply,
    answer_from_text,
    render_card,
    render_modal,
)
from state import InteractionRecord

from ._factory import LONGEST_INTERACTION_ID, approval, ask, ask_multi, confirm, record
from ._slack import check_message, check_view, elements


def _isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions, each alphabetical."""
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def test_all_is_sorted_and_exported() -> None:
    assert blocks.__all__ == sorted(blocks.__all__, key=_isort_key)
    for name in blocks.__all__:
        assert getattr(blocks, name) is not None


def test_blocks_does_not_import_bot() -> None:
    code = "import sys, blocks; sys.exit(any(m.split('.')[0] == 'bot' for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


@pytest.mark.parametrize(
    "rec",
    [
        approval({"a": 1}),
        confirm(),
        ask("Which?", ["a", "b"]),
        ask("Which?", [f"o{i}" for i in range(150)]),
        ask_multi("Which?", ["a", "b"]),
        ask("Name?"),
    ],
    ids=["approval", "confirm", "buttons", "paged", "multi", "free"],
)
def test_every_control_matches_the_listener_patterns(rec: InteractionRecord) -> None:
    message = render_card(rec)
    for block, element in elements(message["blocks"]):
        assert ACTION_PATTERN.match(element["action_id"])
        assert block["block_id"].startswith(f"hb|{rec.interaction_id}|")
    assert CALLBACK_PATTERN.match(render_modal(rec)["callback_id"])


def test_the_longest_interaction_id_still_fits() -> None:
    longest = "i" * LONGEST_INTERACTION_ID
    rec = ask("Which?", [f"o{i}" for i in range(150)], interaction_id=longest)
    check_message(render_card(rec, page=1))
    check_view(render_modal(rec))
    with pytest.raises(ValueError, match="interaction_id"):
        render_card(ask("Which?", ["a"], interaction_id=longest + "i"))


@pytest.mark.parametrize(
    ("rec", "accepted"),
    [
        (ask("Name?"), True),
        (ask("Name?", []), True),
        (record("n", {"question": "?"}, {"type": "integer"}), True),
        (record("n", {"question": "?"}, {"type": "number"}), True),
        (record("n", {"question": "?"}, {"type": "string", "format": "date"}), True),
        (record("n", {"question": "?"}), True),
        (ask("Which?", ["a", "b"]), False),
        (ask_multi(), False),
        (confirm(), False),
        (approval({}), False),
        (record("n", {"question": "?"}, {"type": "boolean"}), False),
        (record("n", {"question": "?"}, {"type": "object", "properties": {"a": {}}}), False),
    ],
)
def test_which_requests_a_thread_reply_answers(rec: InteractionRecord, accepted: bool) -> None:
    assert accepts_text_reply(rec) is accepted


@pytest.mark.parametrize(
    ("schema", "text", "expected"),
    [
        ({"type": "string", "minLength": 1}, "  Postgres, please  ", "Postgres, please"),
        ({"type": "integer", "minimum": 0}, " 12 ", 12),
        ({"type": "number"}, "0.5", 0.5),
        ({"type": "string", "format": "date"}, "2025-01-31", "2025-01-31"),
    ],
)
def test_thread_reply_answers(schema: dict[str, Any], text: str, expected: Any) -> None:
    assert answer_from_text(record("q", {"question": "?"}, schema), text) == expected


@pytest.mark.parametrize(
    ("rec", "text", "message"),
    [
        (
            record("q", {"question": "?"}, {"type": "integer", "minimum": 0}),
            "-1",
            "Must be at least 0",
        ),
        (record("q", {"question": "?"}, {"type": "integer"}), "twelve", "Enter a whole number"),
        (
            record("q", {"question": "?"}, {"type": "string", "format": "date"}),
            "tomorrow",
            "YYYY-MM-DD",
        ),
        (ask("Name?"), "   ", "empty"),
        (ask("Which?", ["a", "b"]), "a", "buttons or form"),
    ],
)
def test_thread_reply_refusals(rec: InteractionRecord, text: str, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        answer_from_text(rec, text)


def test_invalid_answer_is_a_value_error_with_errors() -> None:
    error = InvalidAnswer("bad", errors={"hb|x|v": "Enter a number"})
    assert isinstance(error, ValueError)
    assert str(error) == "bad"
    assert error.errors == {"hb|x|v": "Enter a number"}
    assert InvalidAnswer("bad").errors == {}


def test_a_broken_stored_schema_is_reported_not_crashed() -> None:
    rec = record("q", {"question": "?"}, {"type": "integer", "minimum": "zero"})
    check_message(render_card(rec))
    with pytest.raises(InvalidAnswer, match="invalid answer schema"):
        answer_from_text(rec, "3")
