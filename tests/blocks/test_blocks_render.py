"""Every card, outcome and modal is valid Block Kit, within limits, and cannot ping or link."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blocks import (
    InvalidAnswer,
    parse_view_submission,
    render,
    render_answered,
    render_card,
    render_closed,
    render_modal,
)
from state import InteractionRecord

from ._factory import (
    LONG,
    LONGEST_INTERACTION_ID,
    PING,
    TEXTS,
    adversarial_records,
    approval,
    ask,
    ask_multi,
    confirm,
    record,
)
from ._roundtrip import (
    answered_record,
    section_texts,
)
from ._slack import check_message, check_view, elements, submit

CASES = [
    pytest.param(name, text_id, id=f"{name}-{text_id}")
    for text_id, text in TEXTS.items()
    for name in adversarial_records(text)
]


def _answer_for(rec: InteractionRecord, text: str) -> Any:
    if rec.kind == "approval":
        return {"approved": False, "reason": text or "no"}
    if rec.kind == "confirm":
        return True
    options = rec.payload.get("options")
    if rec.kind == "ask_user_multi":
        return list(options or [])[:3]
    if isinstance(options, list) and options:
        return options[-1]
    return {"text": text, "n": [text]} if rec.kind.startswith("generic") else text


def _mrkdwn(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


def _mrkdwn_texts(node: Any) -> list[str]:
    """Every text Slack parses for mentions and links: mrkdwn objects."""
    if isinstance(node, dict):
        found = [node["text"]] if node.get("type") == "mrkdwn" else []
        return found + [t for value in node.values() for t in _mrkdwn_texts(value)]
    if isinstance(node, list):
        return [t for item in node for t in _mrkdwn_texts(item)]
    return []


@pytest.mark.parametrize(("name", "text_id"), CASES)
def test_every_surface_is_valid_block_kit(name: str, text_id: str) -> None:
    text = TEXTS[text_id]
    rec = adversarial_records(text)[name]
    for page in (0, 1, 5):
        check_message(render_card(rec, page=page))
    answered = InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": _answer_for(rec, text),
            "answered_by": "U0ANSWER1",
            "answered_at": 1_700_000_500.0,
        }
    )
    check_message(render_answered(answered))
    for status in ("expired", "superseded", "cancelled"):
        check_message(render_closed(InteractionRecord(**{**rec.__dict__, "status": status})))
    check_view(render_modal(rec))


@pytest.mark.parametrize("field", ["tool", "arguments", "question", "action", "options"])
def test_payload_text_is_escaped_not_dropped(field: str) -> None:
    cards = {
        "tool": approval({}, tool=PING),
        "arguments": approval({"cmd": PING}),
        "question": ask(PING, ["a", "b"]),
        "action": confirm(PING),
        "options": ask("q", [PING + " " + "x" * 80, "b"]),
    }
    message = render_card(cards[field])
    texts = [message["text"], *_mrkdwn_texts(message["blocks"])]
    assert any("&lt;!channel&gt; &amp; &lt;https://evil.example|click here&gt;" in t for t in texts)
    assert not any("<!channel>" in t or "<https://" in t or "<@U0EVIL>" in t for t in texts)


def test_long_text_is_cut_with_an_ellipsis() -> None:
    message = render_card(ask(LONG))
    question = message["blocks"][1]["text"]["text"]
    assert 2990 < len(question) <= 3000
    assert question.endswith("…")
    assert question.startswith("Please decide very")


def test_a_cut_never_splits_an_entity() -> None:
    text = "a" * 2997 + "&&&&"
    question = render_card(ask(text))["blocks"][1]["text"]["text"]
    assert question.endswith("a…")


def test_approval_card() -> None:
    rec = approval({"env": "prod", "replicas": 3})
    message = render_card(rec)
    check_message(message)
    buttons = {e["action_id"]: e for _, e in elements(message["blocks"])}
    assert buttons["hb:approve"]["style"] == "primary"
    assert buttons["hb:deny"]["style"] == "danger"
    assert buttons["hb:deny_reason"]["text"]["text"] == "Deny with reason…"
    shown = _mrkdwn(message)
    assert "*Requested by:* <@U0REQUEST>" in shown
    assert '\\"env\\": \\"prod\\"' in shown
    assert "`deploy`" in message["text"]


def test_a_requester_that_is_not_a_user_id_is_text() -> None:
    shown = _mrkdwn(render_card(approval({}, requester="<!channel>")))
    assert "<!channel>" not in shown
    assert "&lt;!channel&gt;" in shown


def test_a_fence_in_arguments_cannot_close_the_code_block() -> None:
    text = render_card(approval({"x": "```*bold* <!here>```"}))["blocks"][2]["text"]["text"]
    assert text.count("```") == 2


def test_confirm_card() -> None:
    message = render_card(confirm())
    labels = [(e["action_id"], e["text"]["text"]) for _, e in elements(message["blocks"])]
    assert labels == [("hb:confirm", "Confirm"), ("hb:cancel", "Cancel")]


def test_few_short_options_are_buttons() -> None:
    message = render_card(ask("Which?", ["postgres", "mysql", "sqlite"]))
    found = [(e["type"], e["action_id"], e["value"]) for _, e in elements(message["blocks"])]
    assert found == [
        ("button", "hb:option:0", "0"),
        ("button", "hb:option:1", "1"),
        ("button", "hb:option:2", "2"),
    ]


@pytest.mark.parametrize(
    "options",
    [
        pytest.param([f"o{i}" for i in range(6)], id="six"),
        pytest.param(["short", "a label that is longer than thirty characters"], id="long-label"),
    ],
)
def test_more_or_longer_options_are_a_select(options: list[str]) -> None:
    message = render_card(ask("Which?", options))
    [(_, select)] = list(elements(message["blocks"]))
    assert select["type"] == "static_select"
    assert [o["value"] for o in select["options"]] == [str(i) for i in range(len(options))]


def test_over_100_options_page_and_search() -> None:
    rec = ask("Which?", [f"option {i}" for i in range(250)])
    first = render_card(rec)
    controls = {e["action_id"]: e for _, e in elements(first["blocks"])}
    assert [o["value"] for o in controls["hb:select"]["options"]] == [str(i) for i in range(100)]
    assert controls["hb:more:1"]["value"] == "1"
    assert "hb:more:-1" not in controls
    assert controls["hb:answer"]["text"]["text"] == "Search all 250 options…"
    assert "Showing options 1–100 of 250." in _mrkdwn(first)
    middle = {e["action_id"]: e for _, e in elements(render_card(rec, page=1)["blocks"])}
    assert middle["hb:select"]["options"][0]["value"] == "100"
    assert set(middle) == {"hb:select", "hb:more:0", "hb:more:2", "hb:answer"}
    last = {e["action_id"]: e for _, e in elements(render_card(rec, page=99)["blocks"])}
    assert [o["value"] for o in last["hb:select"]["options"]] == [str(i) for i in range(200, 250)]
    assert "hb:more:3" not in last


def test_cut_option_labels_are_numbered_and_listed_in_full() -> None:
    long = "x" * 150 + " tail"
    message = render_card(ask("Which?", [long, "short", "y" * 200]))
    [(_, select)] = list(elements(message["blocks"]))
    labels = [o["text"]["text"] for o in select["options"]]
    assert labels[0].startswith("1. xxx") and labels[0].endswith("…")
    assert labels[1] == "2. short"
    listing = message["blocks"][3]["text"]["text"]
    assert "*1.* " + long in listing
    assert "*3.* " + "y" * 200 in listing
    assert "short" not in listing


def test_many_long_options_never_exceed_50_blocks() -> None:
    message = render_card(ask("Which?", ["z" * 2000 + str(i) for i in range(100)]))
    check_message(message)
    assert "more long options are not spelled out here" in _mrkdwn(message)


@pytest.mark.parametrize(
    ("count", "picker"),
    [
        (3, "checkboxes"),
        (10, "checkboxes"),
        (11, "multi_static_select"),
        (100, "multi_static_select"),
    ],
)
def test_multi_choice_pickers(count: int, picker: str) -> None:
    message = render_card(ask_multi("Which?", [f"r{i}" for i in range(count)]))
    found = [(e["type"], e["action_id"]) for _, e in elements(message["blocks"])]
    assert found == [(picker, "hb:multi"), ("button", "hb:submit")]


def test_multi_choice_over_100_opens_a_form() -> None:
    message = render_card(ask_multi("Which?", [f"r{i}" for i in range(150)]))
    found = [(e["action_id"], e["text"]["text"]) for _, e in elements(message["blocks"])]
    assert found == [("hb:answer", "Choose from 150 options…")]


@pytest.mark.parametrize(
    ("rec", "reply"),
    [
        pytest.param(ask("Name?"), True, id="free-text"),
        pytest.param(ask("Name?", []), True, id="empty-options"),
        pytest.param(record("n", {"question": "How many?"}, {"type": "integer"}), True, id="int"),
        pytest.param(
            record("o", {"q": 1}, {"type": "object", "properties": {"a": {}}}), False, id="obj"
        ),
    ],
)
def test_typed_answers_get_an_answer_button(rec: InteractionRecord, reply: bool) -> None:
    message = render_card(rec)
    found = [(e["action_id"], e["text"]["text"]) for _, e in elements(message["blocks"])]
    assert found == [("hb:answer", "Answer")]
    assert ("Or reply in this thread." in _mrkdwn(message)) is reply


def test_generic_boolean_is_yes_no() -> None:
    message = render_card(record("toggle", {"question": "On?"}, {"type": "boolean"}))
    labels = [e["text"]["text"] for _, e in elements(message["blocks"])]
    assert labels == ["Yes", "No"]


def test_generic_payload_is_shown_as_fields() -> None:
    message = render_card(record("deploy_window", {"question": "When?", "env": "prod", "n": 2}))
    assert message["blocks"][0]["text"]["text"] == "Request: deploy window"
    fields = message["blocks"][2]["fields"]
    assert [f["text"] for f in fields] == ["*env*\nprod", "*n*\n2"]


def test_answered_cards_have_no_controls_and_say_who_and_when() -> None:
    rec = ask("Which?", ["pg", "my"])
    done = InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": "pg",
            "answered_by": "U0ANSWER1",
            "answered_at": 1_700_000_500.0,
        }
    )
    message = render_answered(done)
    assert not list(elements(message["blocks"]))
    line = message["blocks"][-1]["text"]["text"]
    assert line.startswith("✅ Answered by <@U0ANSWER1> <!date^1700000500^")
    assert line.endswith(": pg")
    assert message["text"] == "Question: Which? — answered by <@U0ANSWER1>"
    assert render(done) == message


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (True, "✅ *Approved* by <@U0ANSWER1>"),
        (False, "❌ *Denied* by <@U0ANSWER1>"),
        ({"approved": True}, "✅ *Approved* by <@U0ANSWER1>"),
        (
            {"approved": False, "reason": "not on a <!here> friday"},
            "*Reason:* not on a &lt;!here&gt; friday",
        ),
    ],
)
def test_answered_approval(answer: Any, expected: str) -> None:
    rec = approval({"env": "prod"})
    done = InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": answer,
            "answered_by": "U0ANSWER1",
            "answered_at": 1_700_000_500.0,
        }
    )
    assert expected in render_answered(done)["blocks"][-1]["text"]["text"]


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("expired", "⌛ This request expired <!date^1700086400^"),
        ("superseded", "↪️ This request was superseded"),
        ("cancelled", "🚫 This request was cancelled."),
    ],
)
def test_closed_cards(status: str, expected: str) -> None:
    rec = InteractionRecord(**{**confirm().__dict__, "status": status})
    message = render_closed(rec)
    assert message["blocks"][-1]["text"]["text"].startswith(expected)
    assert not list(elements(message["blocks"]))
    assert render(rec) == message


def test_rendering_the_wrong_state_is_a_developer_error() -> None:
    with pytest.raises(ValueError, match="render_closed"):
        render_closed(confirm())
    with pytest.raises(ValueError, match="render_answered"):
        render_answered(confirm())


@pytest.mark.parametrize(
    ("pending", "title"),
    [
        pytest.param(approval({"env": "prod"}), "Approval request", id="approval"),
        pytest.param(confirm(), "Confirmation", id="confirm"),
        pytest.param(ask("Which?", ["pg", "my"]), "Question", id="ask"),
        pytest.param(record("deploy_window", {"question": "When?"}), "Request: deploy window"),
    ],
)
def test_a_card_keeps_its_title_once_settled(pending: InteractionRecord, title: str) -> None:
    """Only the status line changes: a person must recognise the card they saw pending."""
    answered = InteractionRecord(
        **{
            **pending.__dict__,
            "status": "answered",
            "answer": True if pending.kind in ("approval", "confirm") else "pg",
            "answered_by": "U0ANSWER1",
            "answered_at": 1_700_000_500.0,
        }
    )
    settled = [render(answered)] + [
        render(InteractionRecord(**{**pending.__dict__, "status": status}))
        for status in ("expired", "superseded", "cancelled")
    ]
    card = render_card(pending)
    for message in [card, *settled]:
        assert message["blocks"][0] == {
            "type": "header",
            "text": {"type": "plain_text", "text": title},
        }
        assert message["text"].startswith(title)
        # Everything above the status line is the pending card's, word for word.
        above = len(message["blocks"]) - 1
        assert message["blocks"][:above] == card["blocks"][:above]


def test_the_status_line_reads_when_without_on() -> None:
    """`<!date^…>` shows as "today at 14:05" or "Dec 1, 2026 at 14:05": no "on" before it."""
    rec = approval({"env": "prod"})
    done = InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": True,
            "answered_by": "U0ANSWER1",
            "answered_at": 1_700_000_500.0,
        }
    )
    line = render_answered(done)["blocks"][-1]["text"]["text"]
    assert line.startswith(
        "✅ *Approved* by <@U0ANSWER1> <!date^1700000500^{date_short_pretty} at {time}|"
    )
    assert " on " not in line


def test_many_long_arguments_stay_within_every_limit() -> None:
    huge = {f"arg{i}": "v" * 3000 + "<!channel>" for i in range(60)}
    wide = {f"k{i}": i for i in range(500)}
    for arguments in (huge, wide):
        rec = approval(arguments)
        card = render_card(rec)
        check_message(card)
        assert len(card["blocks"]) <= 50
        assert "…" in section_texts(card)[1]
        check_message(render(answered_record(rec, {"approved": False, "reason": "x" * 5000})))
        check_view(render_modal(rec))


def test_many_long_payload_keys_on_a_generic_card() -> None:
    payload = {f"key {i} " + "k" * 200: "v" * 3000 for i in range(500)}
    rec = record("custom_kind", payload)
    check_message(render_card(rec))
    check_view(render_modal(rec))


def test_the_longest_interaction_id_fits_private_metadata_and_block_ids() -> None:
    rec = record("ask_user", {"question": "Which?"}, interaction_id="i" * LONGEST_INTERACTION_ID)
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


@pytest.mark.parametrize("when", [1e20, float("inf"), float("nan"), 253_402_300_800.0])
def test_a_date_no_calendar_can_show_still_renders(when: float) -> None:
    rec = ask("Which?", ["a", "b"], expires_at=when)
    check_message(render_card(rec))
    answered = answered_record(rec, "a")
    answered.answered_at = when
    check_message(render(answered))
    expired = InteractionRecord(**{**rec.__dict__, "status": "expired"})
    check_message(render(expired))
