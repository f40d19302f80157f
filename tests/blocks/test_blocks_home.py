"""The App Home view (pure rendering) and reading a click made in it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import blocks
from blocks import (
    ACTION_APPROVE,
    ACTION_MORE,
    ACTION_REVOKE,
    ACTION_SELECT,
    Decision,
    InvalidAnswer,
    parse_block_action,
    render_home,
)

# Kept out of `blocks.__all__` (only the Slack app's internals use it): pinned here directly.
from state import AuditEntry, Grant

from ..conftest import votes
from ._factory import CREATED, LONG, PING, WORLD, adversarial_records, approval, ask
from ._slack import check_home_view

HOME_BLOCK_LIMIT = 100
"""Slack refuses a Home view of more blocks than this."""

BASE = "https://acme.slack.com/"


def _texts(view: dict[str, Any]) -> str:
    return str(view["blocks"])


def test_waiting_requests_carry_the_cards_controls_and_a_thread_link() -> None:
    record = approval({"service": "api"}, message_ts="1700000000.000200")
    view = render_home(waiting=[record], decided=[], base_url=BASE)
    check_home_view(view)
    card_actions = [b for b in blocks.render_card(record)["blocks"] if b["type"] == "actions"]
    home_actions = [b for b in view["blocks"] if b["type"] == "actions"]
    assert home_actions == card_actions  # same block ids and action ids: the same claim path
    assert "https://acme.slack.com/archives/C0CHANNEL/p1700000000000200|Open the thread" in (
        _texts(view)
    )


def test_home_shows_no_paging_buttons() -> None:
    record = ask("Which service?", [f"service-{n:03d}" for n in range(250)])
    view = render_home(waiting=[record], decided=[])
    check_home_view(view)
    ids = [e["action_id"] for b in view["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert ACTION_SELECT in ids
    assert not any(i.startswith(ACTION_MORE) for i in ids)


def test_many_waiting_requests_stay_within_slacks_100_blocks() -> None:
    records = [approval({"n": n}, tool=f"tool_{n}") for n in range(60)]
    view = render_home(waiting=records, decided=[], grants=[])
    check_home_view(view)
    assert len(view["blocks"]) <= HOME_BLOCK_LIMIT
    shown = {b["block_id"] for b in view["blocks"] if b["type"] == "actions"}
    assert 0 < len(shown) < 60
    assert f"{60 - len(shown)} more wait on you" in _texts(view)
    assert "Standing grants you gave" in _texts(view)  # the later sections still fit


@pytest.mark.parametrize("text", [PING, LONG, WORLD])
def test_hostile_payloads_render_safely_in_home(text: str) -> None:
    records = list(adversarial_records(text).values())
    answered = [
        Decision(
            entry=AuditEntry(at=CREATED, action="answered", detail=text),
            record=replace(record, status="answered", answer=True, answered_by="U0BOB"),
        )
        for record in records
    ]
    gone = [Decision(entry=AuditEntry(at=CREATED, action="answered", detail=text))] * 3
    grants = [_grant(f"g{n}", tool=text) for n in range(30)]
    view = render_home(waiting=records, decided=answered + gone, grants=grants, notice="Refused.")
    check_home_view(view)


def test_nothing_waiting_and_nothing_decided_say_so() -> None:
    view = render_home(waiting=[], decided=[])
    check_home_view(view)
    text = _texts(view)
    assert "Nothing waits on you now." in text
    assert "You have not answered anything lately." in text
    assert "Standing grants" not in text  # no grant source, no section


def test_decisions_are_listed_with_their_request() -> None:
    record = approval({"service": "api"}, status="answered", answer=False, answered_by="U0BOB")
    entry = AuditEntry(at=CREATED, action="answered", interaction_id=record.interaction_id)
    gone = AuditEntry(at=CREATED, action="answered", interaction_id="int_gone", detail="true")
    view = render_home(
        waiting=[], decided=[Decision(entry=entry, record=record), Decision(entry=gone)]
    )
    check_home_view(view)
    text = _texts(view)
    assert "Denied `deploy`, asked by <@U0REQUEST>, by you" in text
    assert "`int_gone`: true" in text


def test_recently_decided_lines_say_what_ran_with_which_arguments_who_asked_and_when() -> None:
    decided = []
    for n, (requester, at) in enumerate([("U0ALICE", CREATED), ("U0CAROL", CREATED + 60)]):
        record = approval(
            {"service": f"svc{n}", "version": "2.3"},
            status="answered",
            answer=True,
            answered_by="U0BOB",
            requester=requester,
        )
        entry = AuditEntry(
            at=at, action="answered", user="U0BOB", interaction_id=record.interaction_id
        )
        decided.append(
            Decision(entry=entry, record=record, arguments=f"service=svc{n} version=2.3")
        )
    view = render_home(waiting=[], decided=decided)
    check_home_view(view)
    [lines] = [b["text"]["text"] for b in view["blocks"] if "Approved" in str(b.get("text", ""))]
    first, second = lines.splitlines()
    assert first.startswith(
        "• Approved `deploy` `service=svc0 version=2.3`, asked by <@U0ALICE>, by you · "
    )
    assert second.startswith(
        "• Approved `deploy` `service=svc1 version=2.3`, asked by <@U0CAROL>, by you · "
    )
    assert f"<!date^{int(CREATED)}^" in first and f"<!date^{int(CREATED) + 60}^" in second


def test_a_decision_shows_no_arguments_the_caller_did_not_prepare() -> None:
    record = approval({"token": "hunter2"}, status="answered", answer=True, answered_by="U0BOB")
    entry = AuditEntry(at=CREATED, action="answered", interaction_id=record.interaction_id)
    view = render_home(waiting=[], decided=[Decision(entry=entry, record=record)])
    assert "hunter2" not in _texts(view) and "Approved `deploy`, asked by" in _texts(view)


def _grant(grant_id: str, **fields: Any) -> Grant:
    values: dict[str, Any] = {
        "grant_id": grant_id,
        "tool": "deploy",
        "scope": "thread",
        "channel": "C0OPS",
        "thread_ts": "1.1",
        "granted_by": "U0BOB",
        "created_at": CREATED,
        "expires_at": CREATED + 3600,
        "interaction_id": f"int_{grant_id}",
        "run_id": "run-1",
        "path": "granter.deploy",
        "requesters": ("U0ALICE",),
    }
    return Grant(**{**values, **fields})


def test_grant_lines_list_each_grant_with_its_revoke_button() -> None:
    grants = [_grant("g1"), _grant("g2", tool="restart", scope="channel", channel="C0WEB")]
    view = render_home(waiting=[], decided=[], grants=grants)
    check_home_view(view)
    text = _texts(view)
    assert "`deploy` in this thread of <#C0OPS>" in text
    assert "`restart` in <#C0WEB>" in text
    revokes = [
        b for b in view["blocks"] if b.get("accessory", {}).get("action_id") == ACTION_REVOKE
    ]
    assert [b["block_id"] for b in revokes] == ["hb|g1|revoke", "hb|g2|revoke"]
    assert [b["accessory"]["value"] for b in revokes] == ["g1", "g2"]
    assert "no standing grants" in _texts(render_home(waiting=[], decided=[], grants=[]))


def test_many_grants_list_the_first_ones_and_say_how_many_more() -> None:
    view = render_home(waiting=[], decided=[], grants=[_grant(f"g{n}") for n in range(20)])
    check_home_view(view)
    revokes = [b for b in view["blocks"] if "accessory" in b]
    assert len(revokes) == 8
    assert "12 more are in force; `handback grants` lists them all." in _texts(view)


def _home_click(**overrides: Any) -> dict[str, Any]:
    record = approval()
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": "U0BOB"},
        "container": {"type": "view", "view_id": "V1"},
        "view": {"id": "V1", "type": "home", "state": {"values": {}}},
        "trigger_id": "1.2.abc",
        "actions": [
            {
                "action_id": ACTION_APPROVE,
                "block_id": f"hb|{record.interaction_id}|a",
                "type": "button",
                "value": "approve",
            }
        ],
    }
    payload.update(overrides)
    return payload


def test_a_click_in_home_is_read_as_from_home_without_a_channel() -> None:
    action = parse_block_action(_home_click())
    assert action.origin == "home"
    assert action.channel_id is None and action.message_ts is None


def test_a_click_from_home_that_names_a_channel_is_not_read() -> None:
    with pytest.raises(InvalidAnswer):
        parse_block_action(_home_click(channel={"id": "C0OTHER"}))
    with pytest.raises(InvalidAnswer):
        parse_block_action(
            _home_click(container={"type": "view", "view_id": "V1", "channel_id": "C0OTHER"})
        )


def test_only_a_home_view_makes_a_home_click() -> None:
    modal = _home_click(view={"id": "V1", "type": "modal"})
    assert parse_block_action(modal).origin == "message"
    message = _home_click(container={"type": "message", "message_ts": "1.2", "channel_id": "C1"})
    message.pop("view")
    assert parse_block_action(message).origin == "message"


def test_a_vote_that_still_waits_reads_as_approved_not_denied() -> None:
    """Under a two-person rule a vote is an `answered` audit entry while the request stays
    pending (its answer unset): Recently decided says approved, waiting for more."""
    pending = replace(approval(), status="pending", votes=votes(("U0BOB", CREATED)))
    entry = AuditEntry(at=CREATED, action="answered", user="U0BOB", detail="approved 1 of 2")
    view = render_home(waiting=[], decided=[Decision(entry=entry, record=pending)])
    check_home_view(view)
    text = _texts(view)
    assert "Approved" in text and "waiting for more approvers" in text
    assert "Denied" not in text
