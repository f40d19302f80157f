"""Adversarial edges of rendering and reading back: odd payloads, odd schemas, spoofing attempts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blocks import (
    InvalidAnswer,
    answer_from_submission,
    answer_from_text,
    parse_block_action,
    parse_view_submission,
    render,
    render_card,
    render_modal,
    resolve_answer,
)
from blocks._ids import MAX_INTERACTION_ID
from state import InteractionRecord

from ._factory import approval, ask, ask_multi, record
from ._slack import check_message, check_view, click, elements, submit

RLO = "\u202e"
"""RIGHT-TO-LEFT OVERRIDE: shows the text after it backwards (the "Trojan Source" trick)."""
INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u2060"]


def _answered(rec: InteractionRecord, answer: Any, by: str = "U0BOB") -> InteractionRecord:
    return InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": answer,
            "answered_by": by,
            "answered_at": 1_700_000_500.0,
        }
    )


def _all_text(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


def _section_texts(message: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in message["blocks"] if b["type"] == "section" and "text" in b]


def _inputs(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in view["blocks"] if b["type"] == "input"]


def _modal_answer(rec: InteractionRecord, entries: dict[str, Any]) -> Any:
    view = render_modal(rec)
    check_view(view)
    return answer_from_submission(rec, parse_view_submission(submit(view, entries)))


def _modal_errors(rec: InteractionRecord, entries: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidAnswer) as caught:
        _modal_answer(rec, entries)
    return caught.value.errors


def _pick(rec: InteractionRecord, index: int) -> Any:
    """Choose option `index` on the card, whether it is buttons or a select."""
    message = render_card(rec, page=index // 100)
    check_message(message)
    for _, element in elements(message["blocks"]):
        if element["action_id"] == f"hb:option:{index}":
            return resolve_answer(rec, parse_block_action(click(message, element["action_id"])))
    payload = click(message, "hb:select", option_values=[str(index)])
    return resolve_answer(rec, parse_block_action(payload))


# ------------------------------------------------------------------ odd options and questions

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
        answer = _pick(rec, index)
        # The exact stored value, not its label: 0 stays 0, None stays None, "a" #2 is index 1.
        assert answer == expected
        assert type(answer) is type(expected)
    check_message(render(_answered(rec, options[-1])))
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
        shown = _all_text(message)
        assert "<!channel>" not in shown and "<!here>" not in shown
    check_message(render(_answered(rec, "a")))


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
    assert _pick(hundred, 99) == "o99"

    more = ask("Which?", [f"o{i}" for i in range(101)])
    first, second = render_card(more), render_card(more, page=1)
    check_message(first)
    check_message(second)
    assert any(e["action_id"] == "hb:more:1" for _, e in elements(first["blocks"]))
    [select] = [e for _, e in elements(second["blocks"]) if e["type"] == "static_select"]
    assert [o["value"] for o in select["options"]] == ["100"]
    assert _pick(more, 100) == "o100"


def test_101_multi_options_open_a_form_that_reaches_the_last() -> None:
    options = [f"o{i}" for i in range(101)]
    rec = ask_multi("Which?", options)
    check_message(render_card(rec))
    view = render_modal(rec)
    check_view(view)
    second = _inputs(view)[1]["block_id"]
    assert _modal_answer(rec, {second: ["100"]}) == ["o100"]


def test_a_2000_char_option_is_cut_visibly_and_answers_in_full() -> None:
    long = "x" * 1999 + "!"
    for rec in (ask("Which?", [long, "short"]), ask_multi("Which?", [long, "short"])):
        message = render_card(rec)
        check_message(message)
        shown = _all_text(message)
        assert "…" in shown and long not in shown
        check_view(render_modal(rec))
    assert _pick(ask("Which?", [long, "short"]), 0) == long


# ------------------------------------------------------------------ odd schemas


@pytest.mark.parametrize(
    "enum", [[1, 2, 3], [True, False], [None], [None, 0, False, "", 0.0], [{"a": 1}, [1, 2]]]
)
def test_schema_enums_of_non_strings_answer_with_the_exact_value(enum: list[Any]) -> None:
    rec = record("pick", {"question": "Which?"}, {"enum": enum})
    for index, expected in enumerate(enum):
        answer = _pick(rec, index)
        assert answer == expected
        assert type(answer) is type(expected)
    check_view(render_modal(rec))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": ["string", "null"]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 20}]},
    ],
)
def test_a_nullable_string_is_typed_as_text_not_json(schema: dict[str, Any]) -> None:
    rec = record("note", {"question": "Anything to add?"}, schema)
    view = render_modal(rec)
    check_view(view)
    [field] = _inputs(view)
    assert field["element"]["type"] == "plain_text_input"
    assert field.get("hint", {}).get("text") != "Enter JSON."
    assert _modal_answer(rec, {field["block_id"]: "ship it"}) == "ship it"
    # Left empty, a nullable answer is null rather than "Required".
    assert _modal_answer(rec, {}) is None
    # A plain thread reply answers it too, as for any free-text question.
    assert answer_from_text(rec, "  ship it ") == "ship it"


def test_a_nullable_property_gets_its_own_input() -> None:
    # What pydantic writes for `replicas: int | None = None` and `note: str | None`.
    schema = {
        "type": "object",
        "properties": {
            "replicas": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Replicas"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Note"},
        },
        "required": ["note"],
    }
    rec = record("form", {"question": "Scale?"}, schema)
    view = render_modal(rec)
    check_view(view)
    replicas, note = _inputs(view)
    assert replicas["element"]["type"] == "number_input"
    assert note["element"]["type"] == "plain_text_input"
    assert note["optional"] is True
    answer = _modal_answer(rec, {replicas["block_id"]: "3", note["block_id"]: "hi"})
    assert answer == {"replicas": 3, "note": "hi"}
    # A required nullable field left empty is null; an optional one is left out.
    assert _modal_answer(rec, {}) == {"note": None}


@pytest.mark.parametrize(
    ("schema", "entry", "expected"),
    [
        ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "7", 7),
        ({"anyOf": [{"const": "a"}, {"const": "b"}]}, '"b"', "b"),
        ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, "5", 5),
    ],
)
def test_union_and_ref_schemas_are_typed_as_json_and_validated(
    schema: dict[str, Any], entry: str, expected: Any
) -> None:
    rec = record("pick", {"question": "Value?"}, schema)
    view = render_modal(rec)
    check_view(view)
    [field] = _inputs(view)
    assert _modal_answer(rec, {field["block_id"]: entry}) == expected
    assert _modal_errors(rec, {field["block_id"]: "[1]"})


@pytest.mark.parametrize("ref", ["#/$defs/missing", "https://example.invalid/schema.json"])
def test_a_ref_that_cannot_be_resolved_is_an_invalid_answer(ref: str) -> None:
    # jsonschema raises its own `Unresolvable`; the app only catches `InvalidAnswer`.
    rec = record("pick", {"question": "Value?"}, {"$ref": ref})
    view = render_modal(rec)
    check_view(view)
    [field] = _inputs(view)
    with pytest.raises(InvalidAnswer, match="schema"):
        _modal_answer(rec, {field["block_id"]: "1"})
    with pytest.raises(InvalidAnswer, match="schema"):
        answer_from_text(
            record("pick", {"question": "Value?"}, {"$ref": ref, "type": "string"}), "x"
        )


def test_nested_objects_in_a_modal_are_typed_as_json() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "limits": {
                "type": "object",
                "properties": {"cpu": {"type": "integer", "minimum": 1}},
                "required": ["cpu"],
            },
        },
        "required": ["limits"],
    }
    rec = record("form", {"question": "Limits?"}, schema)
    view = render_modal(rec)
    check_view(view)
    name, limits = _inputs(view)
    assert name["element"]["type"] == "plain_text_input"
    assert limits["element"]["multiline"] is True
    answer = _modal_answer(rec, {limits["block_id"]: '{"cpu": 2}'})
    assert answer == {"limits": {"cpu": 2}}
    errors = _modal_errors(rec, {limits["block_id"]: '{"cpu": 0}'})
    assert errors == {limits["block_id"]: "Must be at least 1"}
    errors = _modal_errors(rec, {limits["block_id"]: "{cpu: 2"})
    assert errors == {limits["block_id"]: "Enter valid JSON"}


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2024-05-01T09:30:00Z", "tomorrow at nine"),
        ("date-time", "2024-05-01T09:30:00.5+02:00", "2024-05-01"),
        ("date-time", "2024-05-01T09:30:00+00:00", "2024-02-30T09:30:00Z"),
        ("email", "ops@example.com", "not an address"),
        ("date", "2024-02-29", "2023-02-29"),
    ],
)
def test_formats_are_checked(fmt: str, good: str, bad: str) -> None:
    rec = record("when", {"question": "When?"}, {"type": "string", "format": fmt})
    assert answer_from_text(rec, good) == good
    with pytest.raises(InvalidAnswer):
        answer_from_text(rec, bad)
    check_view(render_modal(rec))


def test_a_date_time_input_says_what_to_type() -> None:
    rec = record("when", {"question": "When?"}, {"type": "string", "format": "date-time"})
    [field] = _inputs(render_modal(rec))
    assert "2024" in field["hint"]["text"]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "number", "minimum": 1e300},
        {"type": "number", "minimum": 1e-7, "maximum": 1e16},
        {"type": "integer", "minimum": -1e20, "maximum": 10**40},
        {"type": "number", "minimum": -0.0, "maximum": 2.5e-3},
    ],
)
def test_number_bounds_are_plain_decimals_slack_accepts(schema: dict[str, Any]) -> None:
    view = render_modal(record("n", {"question": "How many?"}, schema))
    check_view(view)


def test_integer_bounds_round_inwards() -> None:
    schema = {"type": "integer", "minimum": 1.5, "maximum": 4.5}
    [field] = _inputs(render_modal(record("n", {"question": "How many?"}, schema)))
    assert (field["element"]["min_value"], field["element"]["max_value"]) == ("2", "4")


def test_min_length_above_max_length_is_not_sent_to_slack() -> None:
    schema = {"type": "string", "minLength": 10, "maxLength": 5}
    rec = record("t", {"question": "Text?"}, schema)
    check_view(render_modal(rec))
    with pytest.raises(InvalidAnswer):
        answer_from_text(rec, "abcdefg")


# ------------------------------------------------------------------ spoofing


@pytest.mark.parametrize(
    "tool", ["x` *Approved by <@U0BOSS>* `y", "dep``loy", "a\n*Approved*", "`", "```"]
)
def test_a_backtick_in_the_tool_name_cannot_leave_the_code_span(tool: str) -> None:
    rec = approval({"service": "api"}, tool=tool)
    card = render_card(rec)
    check_message(card)
    tool_line = _section_texts(card)[0].split("\n")[0]
    # `*Tool:* ` then exactly one code span, with no backtick or line break inside it.
    assert tool_line.startswith("*Tool:* `") and tool_line.endswith("`")
    assert "`" not in tool_line[len("*Tool:* `") : -1]
    assert "\n" not in card["text"].split("`")[1]
    assert card["text"].count("`") == 2
    modal = render_modal(rec)
    check_view(modal)
    deny_text = modal["blocks"][0]["text"]["text"]
    assert deny_text.count("`") == 2 and "\n" not in deny_text


@pytest.mark.parametrize("char", INVISIBLE)
def test_invisible_and_bidi_characters_in_arguments_are_made_visible(char: str) -> None:
    # A right-to-left override can make `rm -rf /` read like something harmless.
    arguments = {"command": f"echo safe {char}/ fr- mr", f"key{char}": "v"}
    rec = approval(arguments, tool=f"run{char}")
    card = render_card(rec)
    check_message(card)
    assert char not in _all_text(card)
    escaped = f"\\u{ord(char):04x}"
    assert escaped in _section_texts(card)[1]
    answered = render(_answered(rec, True))
    assert char not in _all_text(answered)


def test_zero_width_joiners_in_emoji_survive() -> None:
    family = "👨\u200d👩\u200d👧"
    card = render_card(approval({"note": family}))
    assert family in _section_texts(card)[1]


def test_a_fence_in_arguments_stays_inside_one_code_block() -> None:
    arguments = {"cmd": "```\n*Approved by* <@U0BOSS>\n```", "k": "````" * 10, "``": "`"}
    card = render_card(approval(arguments))
    check_message(card)
    args = _section_texts(card)[1]
    assert args.count("```") == 2
    assert args.endswith("```")


def test_bold_in_a_question_cannot_mention_and_the_status_line_comes_last() -> None:
    question = "Pick one\n\n✅ *Approved* by <@U0BOSS> on <!date^1700000000^{date}|today>"
    rec = ask(question, ["a", "b"])
    card = render_card(rec)
    check_message(card)
    assert "<@U0BOSS>" not in _all_text(card)
    done = render(_answered(rec, "a", by="U0CAROL"))
    check_message(done)
    assert "<@U0BOSS>" not in _all_text(done) and "<!date^1700000000^{date}" not in _all_text(done)
    # The real outcome, with a real mention, is the card's last word.
    assert _section_texts(done)[-1].startswith("✅ Answered by <@U0CAROL>")


def test_a_deny_reason_cannot_add_a_line_to_the_card() -> None:
    reason = "fine\n\n✅ *Approved* by <@U0BOSS>\r\nreally"
    done = render(_answered(approval({"a": 1}), {"approved": False, "reason": reason}))
    check_message(done)
    status = _section_texts(done)[-1]
    lines = status.split("\n")
    assert lines[0].startswith("❌ *Denied* by <@U0BOB>")
    assert len(lines) == 2 and lines[1].startswith("*Reason:* fine")
    assert "<@U0BOSS>" not in status


# ------------------------------------------------------------------ size limits


def test_many_long_arguments_stay_within_every_limit() -> None:
    huge = {f"arg{i}": "v" * 3000 + "<!channel>" for i in range(60)}
    wide = {f"k{i}": i for i in range(500)}
    for arguments in (huge, wide):
        rec = approval(arguments)
        card = render_card(rec)
        check_message(card)
        assert len(card["blocks"]) <= 50
        assert "…" in _section_texts(card)[1]
        check_message(render(_answered(rec, {"approved": False, "reason": "x" * 5000})))
        check_view(render_modal(rec))


def test_many_long_payload_keys_on_a_generic_card() -> None:
    payload = {f"key {i} " + "k" * 200: "v" * 3000 for i in range(500)}
    rec = record("custom_kind", payload)
    check_message(render_card(rec))
    check_view(render_modal(rec))


def test_the_longest_interaction_id_fits_private_metadata_and_block_ids() -> None:
    rec = record("ask_user", {"question": "Which?"}, interaction_id="i" * MAX_INTERACTION_ID)
    check_message(render_card(rec))
    view = render_modal(rec)
    check_view(view)
    assert view["private_metadata"] == rec.interaction_id
    too_long = record("ask_user", {"question": "Which?"}, interaction_id="i" * 3001)
    with pytest.raises(ValueError, match="interaction_id"):
        render_card(too_long)


def test_a_forged_private_metadata_over_3000_is_refused() -> None:
    rec = ask("Which?")
    payload = submit(render_modal(rec), {})
    payload["view"]["private_metadata"] = "x" * 3001
    with pytest.raises(InvalidAnswer):
        parse_view_submission(payload)


# ------------------------------------------------------------------ the deny-reason modal


def test_deny_reason_modal_edges() -> None:
    rec = approval({"service": "api"}, tool="deploy <!channel>")
    view = render_modal(rec)
    check_view(view)
    [reason] = _inputs(view)
    block = reason["block_id"]
    assert _modal_errors(rec, {block: "   \n  "}) == {block: "Enter a reason"}
    assert block in _modal_errors(rec, {block: "x" * 2001})
    answer = _modal_answer(rec, {block: "  <!channel> not now  "})
    assert answer == {"approved": False, "reason": "<!channel> not now"}
    done = render(_answered(rec, answer))
    check_message(done)
    assert "<!channel>" not in _all_text(done)
    # A deny form cannot answer a question, and an approval cannot be answered by a form.
    with pytest.raises(InvalidAnswer):
        answer_from_submission(ask("Which?"), parse_view_submission(submit(view, {block: "x"})))


@pytest.mark.parametrize("when", [1e20, float("inf"), float("nan"), 253_402_300_800.0])
def test_a_date_no_calendar_can_show_still_renders(when: float) -> None:
    rec = ask("Which?", ["a", "b"], expires_at=when)
    check_message(render_card(rec))
    answered = _answered(rec, "a")
    answered.answered_at = when
    check_message(render(answered))
    expired = InteractionRecord(**{**rec.__dict__, "status": "expired"})
    check_message(render(expired))
