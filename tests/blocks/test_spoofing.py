"""Text we did not write cannot pass for ours: a tool name, arguments, a question or a deny
reason cannot leave its code span, mention anyone or add a line to the card."""

from __future__ import annotations

import pytest

from blocks import (
    render,
    render_card,
    render_modal,
)

from ._factory import approval, ask
from ._roundtrip import (
    all_text,
    answered_record,
    section_texts,
)
from ._slack import check_message, check_view


@pytest.mark.parametrize(
    "tool", ["x` *Approved by <@U0BOSS>* `y", "dep``loy", "a\n*Approved*", "`", "```"]
)
def test_a_backtick_in_the_tool_name_cannot_leave_the_code_span(tool: str) -> None:
    rec = approval({"service": "api"}, tool=tool)
    card = render_card(rec)
    check_message(card)
    tool_line = section_texts(card)[0].split("\n")[0]
    # `*Tool:* ` then exactly one code span, with no backtick or line break inside it.
    assert tool_line.startswith("*Tool:* `") and tool_line.endswith("`")
    assert "`" not in tool_line[len("*Tool:* `") : -1]
    assert "\n" not in card["text"].split("`")[1]
    assert card["text"].count("`") == 2
    modal = render_modal(rec)
    check_view(modal)
    deny_text = modal["blocks"][0]["text"]["text"]
    assert deny_text.count("`") == 2 and "\n" not in deny_text


def test_a_fence_in_arguments_stays_inside_one_code_block() -> None:
    arguments = {"cmd": "```\n*Approved by* <@U0BOSS>\n```", "k": "````" * 10, "``": "`"}
    card = render_card(approval(arguments))
    check_message(card)
    args = section_texts(card)[1]
    assert args.count("```") == 2
    assert args.endswith("```")


def test_bold_in_a_question_cannot_mention_and_the_status_line_comes_last() -> None:
    question = "Pick one\n\n✅ *Approved* by <@U0BOSS> on <!date^1700000000^{date}|today>"
    rec = ask(question, ["a", "b"])
    card = render_card(rec)
    check_message(card)
    assert "<@U0BOSS>" not in all_text(card)
    done = render(answered_record(rec, "a", by="U0CAROL"))
    check_message(done)
    assert "<@U0BOSS>" not in all_text(done) and "<!date^1700000000^{date}" not in all_text(done)
    # The real outcome, with a real mention, is the card's last word.
    assert section_texts(done)[-1].startswith("✅ Answered by <@U0CAROL>")


def test_a_deny_reason_cannot_add_a_line_to_the_card() -> None:
    reason = "fine\n\n✅ *Approved* by <@U0BOSS>\r\nreally"
    done = render(answered_record(approval({"a": 1}), {"approved": False, "reason": reason}))
    check_message(done)
    status = section_texts(done)[-1]
    lines = status.split("\n")
    assert lines[0].startswith("❌ *Denied* by <@U0BOB>")
    assert len(lines) == 2 and lines[1].startswith("*Reason:* fine")
    assert "<@U0BOSS>" not in status
