"""Cards of an approval that needs several approvers: progress while open, every approver once
closed; valid Block Kit, and ids we did not write shown as text, never as mentions."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from blocks import ACTION_APPROVE, render, render_card
from state import InteractionRecord

# Coordination records, kept out of `state.__all__`: this test pins the store's side.
from ..conftest import votes
from ._factory import approval
from ._slack import check_message


def _two_person(**fields: Any) -> InteractionRecord:
    record = approval({"service": "api"})
    record.payload["rule"] = {"count": 2}
    return replace(record, **fields)


def _text(message: dict[str, Any]) -> str:
    return str(message["blocks"])


def test_an_open_card_says_how_many_approvers_it_needs() -> None:
    card = render_card(_two_person())
    check_message(dict(card))
    assert "Needs 2 different approvers; none so far." in _text(dict(card))


def test_an_open_card_counts_the_approvals_and_keeps_its_buttons() -> None:
    card = render_card(_two_person(votes=votes(("U0BOB", 1.0))))
    check_message(dict(card))
    assert "*1 of 2 approved:* <@U0BOB>" in _text(dict(card))
    assert ACTION_APPROVE in _text(dict(card))


def test_a_one_approver_card_shows_no_count() -> None:
    assert "approved:" not in _text(dict(render_card(approval({"service": "api"}))))
    assert "different approvers" not in _text(dict(render_card(approval({"service": "api"}))))


def test_the_closed_card_names_every_approver() -> None:
    record = _two_person(
        status="answered",
        answer={"approved": True, "approvers": ["U0BOB", "U0CAROL"]},
        answered_by="U0CAROL",
        answered_at=2.0,
        votes=votes(("U0BOB", 1.0), ("U0CAROL", 2.0)),
    )
    card = render(record)
    check_message(dict(card))
    assert "✅ *Approved* by <@U0BOB> and <@U0CAROL>" in _text(dict(card))
    assert "approved by <@U0BOB> and <@U0CAROL>" in card["text"]
    assert ACTION_APPROVE not in _text(dict(card))


def test_a_denial_after_an_approval_says_both() -> None:
    record = _two_person(
        status="answered",
        answer={"approved": False, "reason": "freeze"},
        answered_by="U0CAROL",
        answered_at=2.0,
        votes=votes(("U0BOB", 1.0)),
    )
    card = render(record)
    check_message(dict(card))
    shown = _text(dict(card))
    assert "*Denied* by <@U0CAROL>" in shown and "Approved before that by <@U0BOB>" in shown


def test_a_stored_voter_that_is_not_a_user_id_is_shown_as_text() -> None:
    card = render_card(_two_person(votes=votes(("<!channel> *x*", 1.0))))
    check_message(dict(card))
    assert "<!channel>" not in _text(dict(card))


def test_a_corrupt_rule_shows_no_count() -> None:
    record = approval({"service": "api"})
    record.payload["rule"] = {"count": "two"}
    card = render_card(record)
    check_message(dict(card))
    assert "approved:" not in _text(dict(card))
