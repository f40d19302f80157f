"""Round trips for the blocks tests: a record answered, an option picked on its card or a
modal submitted as Slack would, and the texts a message shows."""

from __future__ import annotations

import json
from typing import Any

import pytest

from blocks import (
    InvalidAnswer,
    answer_from_submission,
    parse_block_action,
    parse_view_submission,
    render_card,
    render_modal,
    resolve_answer,
)
from state import InteractionRecord

from ._slack import check_message, check_view, click, elements, submit


def answered_record(rec: InteractionRecord, answer: Any, by: str = "U0BOB") -> InteractionRecord:
    return InteractionRecord(
        **{
            **rec.__dict__,
            "status": "answered",
            "answer": answer,
            "answered_by": by,
            "answered_at": 1_700_000_500.0,
        }
    )


def all_text(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False)


def section_texts(message: dict[str, Any]) -> list[str]:
    return [b["text"]["text"] for b in message["blocks"] if b["type"] == "section" and "text" in b]


def input_blocks(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in view["blocks"] if b["type"] == "input"]


def modal_answer(rec: InteractionRecord, entries: dict[str, Any]) -> Any:
    view = render_modal(rec)
    check_view(view)
    return answer_from_submission(rec, parse_view_submission(submit(view, entries)))


def modal_errors(rec: InteractionRecord, entries: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidAnswer) as caught:
        modal_answer(rec, entries)
    return caught.value.errors


def pick(rec: InteractionRecord, index: int) -> Any:
    """Choose option `index` on the card, whether it is buttons or a select."""
    message = render_card(rec, page=index // 100)
    check_message(message)
    for _, element in elements(message["blocks"]):
        if element["action_id"] == f"hb:option:{index}":
            return resolve_answer(rec, parse_block_action(click(message, element["action_id"])))
    payload = click(message, "hb:select", option_values=[str(index)])
    return resolve_answer(rec, parse_block_action(payload))
