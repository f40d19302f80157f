"""Odd options and questions: non-strings and look-alikes answer with the stored value, empty
and very long ones are shown, and 100 options are one select while 101 page."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import (
    render,
    render_card,
    render_modal,
)

from ._factory import ask, ask_multi, record
from ._roundtrip import (
    all_text,
    answered_record,
    input_blocks,
    modal_answer,
    pick,
)
from ._slack import check_message, check_view, elements

ODD_OPTIONS = {
    "numbers": [1, 2.5, -3, 0],
    "none": [None, "a"],
    "dicts": [{"env": "prod", "n": 1}, {"env": "dev", "tags": ["a", "<!channel>"]}],
    "lists-of-dicts": [[{"a": 1}], [{"b": {"c": None}}], []],
    "booleans": [True, False],
    "duplicates": ["a", "a", "b"],
    "whitespace-and-case": ["prod", " prod", "prod ", "PROD", "Prod"],
    "empty-string": ["", "b"],
    "only-empty": [""],
}


@pytest.mark.parametrize("name", ODD_OPTIONS)
def test_non_string_and_confusable_options_answer_with_the_stored_value(name: str) -> None:
    options = ODD_OPTIONS[name]
    rec = record("ask_user", {"question": "Pick one", "options": options})
    for index, expected in enumerate(options):
        answer = pick(rec, index)
        # The exact stored value, not its label: 0 stays 0, None stays None, "a" #2 is index 1.
        assert answer == expected
        assert type(answer) is type(expected)
    check_message(render(answered_record(rec, options[-1])))
    check_view(render_modal(rec))


def test_confusable_options_are_distinct_controls() -> None:
    rec = ask("Which?", ODD_OPTIONS["whitespace-and-case"])
    message = render_card(rec)
    values = [e["value"] for _, e in elements(message["blocks"]) if e["type"] == "button"]
    values += [o["value"] for _, e in elements(message["blocks"]) for o in e.get("options", [])]
    assert sorted(values) == ["0", "1", "2", "3", "4"]


def test_an_empty_option_is_labelled_not_blank() -> None:
    message = render_card(ask("Which?", ["", "b"]))
    check_message(message)
    labels = [
        o["text"]["text"] for _, e in elements(message["blocks"]) for o in e.get("options", [])
    ]
    labels += [e["text"]["text"] for _, e in elements(message["blocks"]) if e["type"] == "button"]
    assert "(empty)" in labels


@pytest.mark.parametrize(
    "question",
    [5, None, {"x": "<!channel>"}, ["<!here>", {"deep": "<https://evil|x>"}], True, ""],
)
def test_a_question_that_is_not_a_string_is_shown_safely(question: Any) -> None:
    rec = record("ask_user", {"question": question, "options": ["a", "b"]})
    message = render_card(rec)
    check_message(message)
    if question not in (None, ""):
        shown = all_text(message)
        assert "<!channel>" not in shown and "<!here>" not in shown
    check_message(render(answered_record(rec, "a")))


@pytest.mark.parametrize("schema", [None, {"type": "array", "items": {"enum": []}}])
def test_ask_user_multi_with_no_options_still_renders(schema: dict[str, Any] | None) -> None:
    rec = record("ask_user_multi", {"question": "Pick", "options": []}, schema)
    check_message(render_card(rec))
    check_view(render_modal(rec))


def test_exactly_100_options_is_one_select_and_101_pages() -> None:
    hundred = ask("Which?", [f"o{i}" for i in range(100)])
    message = render_card(hundred)
    check_message(message)
    assert [e["type"] for _, e in elements(message["blocks"])] == ["static_select"]
    assert pick(hundred, 99) == "o99"

    more = ask("Which?", [f"o{i}" for i in range(101)])
    first, second = render_card(more), render_card(more, page=1)
    check_message(first)
    check_message(second)
    assert any(e["action_id"] == "hb:more:1" for _, e in elements(first["blocks"]))
    [select] = [e for _, e in elements(second["blocks"]) if e["type"] == "static_select"]
    assert [o["value"] for o in select["options"]] == ["100"]
    assert pick(more, 100) == "o100"


def test_101_multi_options_open_a_form_that_reaches_the_last() -> None:
    options = [f"o{i}" for i in range(101)]
    rec = ask_multi("Which?", options)
    check_message(render_card(rec))
    view = render_modal(rec)
    check_view(view)
    second = input_blocks(view)[1]["block_id"]
    assert modal_answer(rec, {second: ["100"]}) == ["o100"]


def test_a_2000_char_option_is_cut_visibly_and_answers_in_full() -> None:
    long = "x" * 1999 + "!"
    for rec in (ask("Which?", [long, "short"]), ask_multi("Which?", [long, "short"])):
        message = render_card(rec)
        check_message(message)
        shown = all_text(message)
        assert "…" in shown and long not in shown
        check_view(render_modal(rec))
    assert pick(ask("Which?", [long, "short"]), 0) == long
