"""The grant buttons of an approval card, what a click on one resolves to, and the lines people
read about grants: offered only as the stored rule says, checked against it on the way back."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import blocks
from blocks import ACTION_GRANT, InvalidAnswer

# Kept out of `blocks.__all__` (only the Slack app's internals use it): pinned here directly.
from blocks._grant import grant_used_notice
from state import RULE_KEY, Approval, Grant, InteractionRecord

from ._factory import APPROVAL_SCHEMA, CREATED, approval
from ._slack import check_message, check_safe_mrkdwn, click

# The runtime's approval schema since grants exist: the answer may name one.
GRANT_SCHEMA: dict[str, Any] = copy.deepcopy(APPROVAL_SCHEMA)
GRANT_SCHEMA["anyOf"][1]["properties"]["grant"] = {"type": "string"}


def _ruled(rule: Approval | dict[str, Any], **fields: Any) -> InteractionRecord:
    # A grant binds to the tool's path and the requester: the card offers one only with both.
    fields = {"runnable_path": "ops.deploy", "requester": "U0ALICE", **fields}
    record = approval({"service": "api"}, **fields)
    record.payload[RULE_KEY] = rule.to_json() if isinstance(rule, Approval) else rule
    record.response_schema = GRANT_SCHEMA
    return record


def _buttons(message: blocks.Message) -> dict[str, str]:
    return {
        element["action_id"]: element["text"]["text"]
        for block in message["blocks"]
        if block["type"] == "actions"
        for element in block["elements"]
    }


@pytest.mark.parametrize(
    ("ttl", "label"), [(3600, "1 h"), (1800, "30 min"), (5400, "1.5 h"), (3 * 86400, "3 d")]
)
def test_the_card_offers_each_scope_of_the_rule(ttl: float, label: str) -> None:
    card = blocks.render_card(_ruled(Approval(grants=("thread", "channel"), grant_ttl=ttl)))
    check_message(dict(card))
    assert list(_buttons(card).items())[:3] == [
        ("hb:approve", "Approve"),
        ("hb:grant:thread", f"Approve for this thread, for the requester ({label})"),
        ("hb:grant:channel", f"Approve for this channel, for the requester ({label})"),
    ]
    terms = [b for b in card["blocks"] if "A standing grant approves" in str(b)]
    assert len(terms) == 1 and terms[0]["type"] == "context"
    text = terms[0]["elements"][0]["text"]
    check_safe_mrkdwn(text, "terms")
    assert f"for {label}, later `deploy` calls" in text and "requested by <@U0ALICE>" in text


def test_the_buttons_and_terms_name_the_people_and_pinned_arguments() -> None:
    rule = Approval(
        grants=("thread",), grant_requesters=["U0DAVE", "W0ERIN"], grant_arguments=["service"]
    )
    card = blocks.render_card(_ruled(rule))
    check_message(dict(card))
    assert _buttons(card)["hb:grant:thread"] == (
        "Approve for this thread, for the requester and 2 more (1 h)"
    )
    shown = str(card["blocks"])
    assert "requested by <@U0ALICE>, <@U0DAVE>, <@W0ERIN>, only with `service` = `api`" in shown


@pytest.mark.parametrize(
    "fields", [{"runnable_path": ""}, {"requester": None}], ids=["no path", "no requester"]
)
def test_no_grant_button_for_a_request_a_grant_cannot_be_bound_to(fields: dict[str, Any]) -> None:
    card = blocks.render_card(_ruled(Approval(grants=("thread",)), **fields))
    assert not any(a.startswith(ACTION_GRANT) for a in _buttons(card))
    assert "A standing grant approves" not in str(card["blocks"])


@pytest.mark.parametrize(
    "record",
    [
        approval(),  # stored before rules: no grants
        _ruled(Approval()),
        _ruled({"grants": ["thread"], "count": "many"}),  # unreadable rule: refused anyway
    ],
)
def test_no_grant_button_when_the_rule_offers_none(record: InteractionRecord) -> None:
    assert not any(a.startswith(ACTION_GRANT) for a in _buttons(blocks.render_card(record)))


def test_a_thread_grant_needs_a_thread() -> None:
    record = _ruled(Approval(grants=("thread", "channel")), thread_ts=None)
    assert [a for a in _buttons(blocks.render_card(record)) if a.startswith(ACTION_GRANT)] == [
        "hb:grant:channel"
    ]


def test_a_grant_click_approves_and_names_the_scope() -> None:
    record = _ruled(Approval(grants=("thread",)))
    card = blocks.render_card(record)
    action = blocks.parse_block_action(click(dict(card), "hb:grant:thread"))
    assert blocks.resolve_answer(record, action) == {"approved": True, "grant": "thread"}


@pytest.mark.parametrize(
    ("rule", "value", "schema"),
    [
        (Approval(grants=("thread",)), "channel", GRANT_SCHEMA),  # a scope not offered
        (Approval(grants=("thread",)), "forever", GRANT_SCHEMA),
        (Approval(), "thread", GRANT_SCHEMA),  # no grants at all
        # Paused before answers could name a grant: the stored schema refuses it.
        (Approval(grants=("thread",)), "thread", APPROVAL_SCHEMA),
    ],
)
def test_a_grant_click_the_request_does_not_offer_is_refused(
    rule: Approval, value: str, schema: dict[str, Any]
) -> None:
    offered = _ruled(Approval(grants=("thread",)))
    payload = click(dict(blocks.render_card(offered)), "hb:grant:thread")
    payload["actions"][0]["value"] = value
    record = _ruled(rule)
    record.response_schema = schema
    action = blocks.parse_block_action(payload)
    with pytest.raises(InvalidAnswer):
        blocks.resolve_answer(record, action)


def test_the_answered_card_says_a_grant_came_with_it() -> None:
    record = _ruled(Approval(grants=("thread",), grant_ttl=3600))
    record.status, record.answered_by, record.answered_at = "answered", "U0BOB", CREATED
    record.answer = {"approved": True, "grant": "thread"}
    line = str(blocks.render(record)["blocks"])
    assert "Approved* by <@U0BOB>" in line
    assert f"for the rest of this thread until <!date^{int(CREATED + 3600)}^" in line


def test_the_thread_notice_is_safe_mrkdwn() -> None:
    grant = Grant(
        grant_id="grant_1",
        tool="de`ploy <!here>",
        scope="thread",
        channel="C1",
        thread_ts="1.2",
        granted_by="U0BOB",
        created_at=CREATED,
        expires_at=CREATED + 3600,
    )
    notice = grant_used_notice(grant, grant.tool)
    check_safe_mrkdwn(notice, "notice")
    assert "<@U0BOB>'s standing grant for this thread" in notice
    assert f"<!date^{int(CREATED + 3600)}^" in notice
