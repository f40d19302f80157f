"""Bidi controls and invisible characters never reach Slack raw, in any text we did not write.

A right-to-left override in a question, an option, an answer or a deny reason could make a card
read differently from what is stored ("Trojan Source"); every such character is shown as
`\\uXXXX` instead, by the one helper (`blocks.show_hidden`) that approval arguments use.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import blocks
from blocks import (
    render,
    render_card,
    render_modal,
    show_hidden,
)
from state import InteractionRecord

from ._factory import adversarial_records, approval, ask, ask_multi, confirm, record
from ._roundtrip import (
    all_text,
    answered_record,
    section_texts,
)
from ._slack import check_message, check_view

HIDDEN = [
    "\u202e",  # RIGHT-TO-LEFT OVERRIDE
    "\u202d",  # LEFT-TO-RIGHT OVERRIDE
    "\u202a",  # LEFT-TO-RIGHT EMBEDDING
    "\u2066",  # LEFT-TO-RIGHT ISOLATE
    "\u2067",  # RIGHT-TO-LEFT ISOLATE
    "\u2068",  # FIRST STRONG ISOLATE
    "\u2069",  # POP DIRECTIONAL ISOLATE
    "\u200e",  # LEFT-TO-RIGHT MARK
    "\u200f",  # RIGHT-TO-LEFT MARK
    "\u061c",  # ARABIC LETTER MARK
    "\u200b",  # ZERO WIDTH SPACE
    "\u2060",  # WORD JOINER
    "\ufeff",  # ZERO WIDTH NO-BREAK SPACE
]


def _shown(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _raw(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


def _answered(rec: InteractionRecord, answer: Any) -> InteractionRecord:
    return InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": answer,
            "answered_by": "U0BOB",
            "answered_at": 1_700_000_500.0,
        }
    )


def _records(char: str) -> dict[str, InteractionRecord]:
    text = f"deploy {char}dorp ot ipa"
    options = [f"eu{char}", f"us {char}west", "ap"]
    return {
        **adversarial_records(text),
        "confirm": confirm(text),
        "question": ask(text),
        "question-options": ask(text, options),
        "multi": ask_multi(text, options),
        "custom-kind": record(f"re{char}view", {"title": text, f"k{char}": text}),
    }


@pytest.mark.parametrize("char", HIDDEN)
def test_cards_and_modals_show_hidden_characters(char: str) -> None:
    for name, rec in _records(char).items():
        card = render_card(rec)
        check_message(card)
        assert char not in _raw(card), name
        view = render_modal(rec)
        check_view(view)
        assert char not in _raw(view), name
    assert _shown(char) in _raw(render_card(confirm(f"restart {char}api")))


ANSWERS: dict[str, Any] = {
    "text": "prod{c} -- not staging",
    "list": ["eu{c}", "us"],
    "object": {"region{c}": "eu{c}"},
}


@pytest.mark.parametrize("char", HIDDEN)
@pytest.mark.parametrize("shape", ANSWERS)
def test_answers_on_the_card_show_hidden_characters(char: str, shape: str) -> None:
    answer = json.loads(json.dumps(ANSWERS[shape]).replace("{c}", char))
    answered = render(_answered(ask("Which region?"), answer))
    check_message(answered)
    assert char not in _raw(answered)
    assert _shown(char) in _raw(answered)


@pytest.mark.parametrize("char", HIDDEN)
def test_a_deny_reason_shows_hidden_characters(char: str) -> None:
    reason = f"looks fine {char}devorppa ton"
    denied = {"approved": False, "reason": reason}
    answered = render(_answered(approval({"service": "api"}), denied))
    check_message(answered)
    assert char not in _raw(answered)
    assert f"looks fine {_shown(char)}devorppa" in answered["blocks"][-1]["text"]["text"]


def test_the_fallback_text_shows_hidden_characters() -> None:
    card = render_card(ask("\u202eWhich region?"))
    assert card["text"].endswith("\\u202eWhich region?")


def test_the_zero_width_joiner_of_emoji_stays() -> None:
    family = "👨\u200d👩\u200d👧"
    assert show_hidden(family) == family
    assert family in _raw(render_card(ask(f"Who is in {family}?")))


def test_show_hidden_is_idempotent_and_escape_applies_it() -> None:
    text = "a\u202eb\u2066c"
    once = show_hidden(text)
    assert once == "a\\u202eb\\u2066c"
    assert show_hidden(once) == once
    assert blocks.escape(f"<!here> {text}") == f"&lt;!here&gt; {once}"


def test_a_code_fence_in_a_value_is_still_broken_by_our_own_zero_width_space() -> None:
    card = render_card(approval({"script": "```\n\u202erm -rf /"}))
    arguments = card["blocks"][2]["text"]["text"]
    assert "`\u200b`\u200b`" in arguments
    assert "\\u202erm" in arguments
    assert "\u202e" not in arguments


INVISIBLE = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u2060"]


@pytest.mark.parametrize("char", INVISIBLE)
def test_invisible_and_bidi_characters_in_arguments_are_made_visible(char: str) -> None:
    # A right-to-left override can make `rm -rf /` read like something harmless.
    arguments = {"command": f"echo safe {char}/ fr- mr", f"key{char}": "v"}
    rec = approval(arguments, tool=f"run{char}")
    card = render_card(rec)
    check_message(card)
    assert char not in all_text(card)
    escaped = f"\\u{ord(char):04x}"
    assert escaped in section_texts(card)[1]
    answered = render(answered_record(rec, True))
    assert char not in all_text(answered)


def test_zero_width_joiners_in_emoji_survive() -> None:
    family = "👨\u200d👩\u200d👧"
    card = render_card(approval({"note": family}))
    assert family in section_texts(card)[1]
