"""Who may approve, as a card and a message show it."""

from __future__ import annotations

import blocks
from state import Approval

from ._factory import approval
from ._slack import check_block, check_message


def test_users_and_groups_are_mentioned_as_slack_writes_them() -> None:
    assert blocks.approver_mentions(["U0BOB", "W0GRID", "S0OPS"]) == (
        "<@U0BOB>, <@W0GRID>, <!subteam^S0OPS>"
    )
    assert blocks.approver_mentions([]) == ""


def test_anything_else_is_text_never_a_mention() -> None:
    shown = blocks.approver_mentions(["<!channel>", "bob", "S0OPS|@everyone"])
    assert "<!" not in shown.replace("<!subteam", "") and "&lt;!channel&gt;" in shown


def test_a_note_is_a_context_line_at_the_end_of_a_valid_card() -> None:
    card = blocks.render_card(approval())
    noted = blocks.with_note(card, ":warning: <@U0BOB>'s approval was withdrawn: gone.")
    assert noted["blocks"][:-1] == card["blocks"]
    assert noted["blocks"][-1] == {
        "type": "context",
        "elements": [
            {"type": "mrkdwn", "text": ":warning: <@U0BOB>'s approval was withdrawn: gone."}
        ],
    }
    check_message(dict(noted))
    # The card given is left as it was.
    assert len(card["blocks"]) == len(noted["blocks"]) - 1


def test_a_long_note_is_cut_to_fit() -> None:
    noted = blocks.with_note(blocks.render_card(approval()), "x" * 5000)
    check_block(noted["blocks"][-1])
    assert len(noted["blocks"][-1]["elements"][0]["text"]) <= 2000


def test_an_escalated_card_says_whom_it_was_escalated_to() -> None:
    rule = Approval(approvers=["S0OPS"], remind_after=60, escalate_to=["U0DAVE"])
    record = approval()
    record.payload["rule"] = rule.to_json()
    assert "Escalated" not in str(blocks.render_card(record))
    record.escalated_at = record.created_at + 120
    card = blocks.render_card(record)
    check_message(dict(card))
    assert "Escalated to <@U0DAVE>" in str(card["blocks"][-1])
    # A rule that does not read back names nobody.
    record.payload["rule"] = {"count": "many"}
    assert "Escalated" not in str(blocks.render_card(record))
