"""Round trips: render a card, click it as Slack would, and get the stored value back."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from blocks import (
    CardAction,
    InvalidAnswer,
    page_from_action,
    parse_block_action,
    render_card,
    resolve_answer,
)
from state import InteractionRecord

from ._factory import TEXTS, adversarial_records, approval, ask, ask_multi, confirm, record
from ._slack import CHANNEL, MESSAGE_TS, TRIGGER_ID, USER, click, elements

OPTIONS = ["postgres", "mysql <!channel>", "sqlite 🚀"]
MANY = [f"option {i} — {'x' * (i % 90)}" for i in range(150)]


def _resolve(rec: InteractionRecord, payload: dict[str, Any]) -> Any:
    return resolve_answer(rec, parse_block_action(payload))


@pytest.mark.parametrize(
    ("rec", "action_id", "expected"),
    [
        pytest.param(approval({"env": "prod"}), "hb:approve", True, id="approve"),
        pytest.param(approval({"env": "prod"}), "hb:deny", False, id="deny"),
        pytest.param(confirm(), "hb:confirm", True, id="confirm"),
        pytest.param(confirm(), "hb:cancel", False, id="cancel"),
        pytest.param(
            record("t", {"question": "On?"}, {"type": "boolean"}), "hb:confirm", True, id="yes"
        ),
        pytest.param(
            record("t", {"question": "On?"}, {"type": "boolean"}), "hb:cancel", False, id="no"
        ),
        pytest.param(ask("Which?", OPTIONS), "hb:option:0", "postgres", id="option-0"),
        pytest.param(ask("Which?", OPTIONS), "hb:option:1", "mysql <!channel>", id="option-1"),
        pytest.param(ask("Which?", OPTIONS), "hb:option:2", "sqlite 🚀", id="option-2"),
        pytest.param(
            record("mood", {"question": "?"}, {"enum": [1, None, "x"]}),
            "hb:option:1",
            None,
            id="enum-none",
        ),
    ],
)
def test_button_round_trip(rec: InteractionRecord, action_id: str, expected: Any) -> None:
    payload = click(render_card(rec), action_id)
    action = parse_block_action(payload)
    assert action.interaction_id == rec.interaction_id
    assert action.intent == "answer"
    assert action.user_id == USER
    assert (action.channel_id, action.message_ts, action.trigger_id) == (
        CHANNEL,
        MESSAGE_TS,
        TRIGGER_ID,
    )
    assert resolve_answer(rec, action) == expected


@pytest.mark.parametrize("page", [0, 1])
@pytest.mark.parametrize("pick", [0, 57, 99])
def test_select_round_trip_on_every_page(page: int, pick: int) -> None:
    rec = ask("Which?", MANY)
    message = render_card(rec, page=page)
    [(_, select)] = [(b, e) for b, e in elements(message["blocks"]) if e["type"] == "static_select"]
    option = select["options"][min(pick, len(select["options"]) - 1)]
    answer = _resolve(rec, click(message, "hb:select", option_values=[option["value"]]))
    assert answer == MANY[int(option["value"])]


def test_paging_round_trip() -> None:
    rec = ask("Which?", MANY)
    action = parse_block_action(click(render_card(rec), "hb:more:1"))
    assert (action.action, action.intent) == ("hb:more", "page")
    assert page_from_action(rec, action) == 1
    back = parse_block_action(click(render_card(rec, page=1), "hb:more:0"))
    assert page_from_action(rec, back) == 0
    search = parse_block_action(click(render_card(rec), "hb:answer"))
    assert search.intent == "open_modal"


@pytest.mark.parametrize(
    ("options", "ticked", "expected"),
    [
        (OPTIONS, ["2", "0"], ["postgres", "sqlite 🚀"]),
        (OPTIONS, ["1", "1"], ["mysql <!channel>"]),
        ([f"r{i}" for i in range(40)], ["39", "3"], ["r3", "r39"]),
    ],
)
def test_multi_submit_round_trip(
    options: list[str], ticked: list[str], expected: list[str]
) -> None:
    rec = ask_multi("Which?", options)
    message = render_card(rec)
    toggle = parse_block_action(click(message, "hb:multi", option_values=ticked))
    assert toggle.intent == "selection"
    payload = click(message, "hb:submit", state={"hb:multi": ticked})
    assert _resolve(rec, payload) == expected


def test_multi_submit_with_nothing_ticked() -> None:
    rec = ask_multi("Which?", OPTIONS)
    with pytest.raises(InvalidAnswer, match="at least one"):
        _resolve(rec, click(render_card(rec), "hb:submit"))


@pytest.mark.parametrize(
    ("action_id", "intent"),
    [("hb:answer", "open_modal"), ("hb:deny_reason", "open_modal")],
)
def test_modal_buttons_are_not_answers(action_id: str, intent: str) -> None:
    rec = approval({}) if action_id == "hb:deny_reason" else ask("Name?")
    action = parse_block_action(click(render_card(rec), action_id))
    assert action.intent == intent
    with pytest.raises(InvalidAnswer, match="does not answer"):
        resolve_answer(rec, action)


def _tamper(payload: dict[str, Any], **changes: Any) -> dict[str, Any]:
    payload["actions"][0].update(changes)
    return payload


@pytest.mark.parametrize(
    ("rec", "action_id", "changes", "message"),
    [
        pytest.param(
            ask("Which?", OPTIONS),
            "hb:option:0",
            {"value": "3"},
            "not one of",
            id="index-out-of-range",
        ),
        pytest.param(
            ask("Which?", OPTIONS), "hb:option:0", {"value": "-1"}, "not one of", id="negative"
        ),
        pytest.param(
            ask("Which?", OPTIONS),
            "hb:option:0",
            {"value": "postgres"},
            "not one of",
            id="text-not-index",
        ),
        pytest.param(
            ask("Which?", OPTIONS),
            "hb:option:0",
            {"value": "0" * 40},
            "not one of",
            id="huge-index",
        ),
        pytest.param(
            ask("Which?", OPTIONS), "hb:option:0", {"value": "١"}, "not one of", id="unicode-digit"
        ),
        pytest.param(
            ask("Which?", OPTIONS),
            "hb:option:0",
            {"action_id": "hb:approve"},
            "not an approval",
            id="approve-a-question",
        ),
        pytest.param(
            approval({}),
            "hb:approve",
            {"action_id": "hb:confirm"},
            "yes/no",
            id="confirm-an-approval",
        ),
        pytest.param(
            confirm(),
            "hb:confirm",
            {"action_id": "hb:select", "selected_option": {"value": "0"}},
            "no such options",
            id="select-a-confirm",
        ),
        pytest.param(
            ask("Name?"),
            "hb:answer",
            {"action_id": "hb:submit"},
            "no such options",
            id="submit-free-text",
        ),
        pytest.param(
            ask("Which?", OPTIONS),
            "hb:option:0",
            {"block_id": "hb|forged|o"},
            "different request",
            id="forged-id",
        ),
    ],
)
def test_tampered_clicks_are_refused(
    rec: InteractionRecord, action_id: str, changes: dict[str, Any], message: str
) -> None:
    payload = _tamper(click(render_card(rec), action_id), **changes)
    with pytest.raises(InvalidAnswer, match=message):
        _resolve(rec, payload)


def test_tampered_multi_selection_is_refused() -> None:
    rec = ask_multi("Which?", OPTIONS)
    payload = click(render_card(rec), "hb:submit", state={"hb:multi": ["0", "7"]})
    with pytest.raises(InvalidAnswer, match="not one of"):
        _resolve(rec, payload)


@pytest.mark.parametrize(
    ("field", "blank"),
    [
        pytest.param("channel", {"id": "", "name": "general"}, id="channel-id-empty"),
        pytest.param("channel", {"name": "general"}, id="channel-without-id"),
        pytest.param("container", "", id="container-channel-empty"),
    ],
)
def test_a_click_naming_no_channel_is_refused_not_read_from_the_other_field(
    field: str, blank: Any
) -> None:
    # A blanked field must not borrow the card's channel from the one left intact: the click
    # would then pass the channel check as if it named the card's channel itself.
    payload = click(render_card(approval({})), "hb:approve")
    if field == "channel":
        payload["channel"] = blank
    else:
        payload["container"]["channel_id"] = blank
    with pytest.raises(InvalidAnswer, match="names no channel"):
        parse_block_action(payload)


def test_a_click_without_a_channel_object_takes_the_container_s() -> None:
    payload = click(render_card(approval({})), "hb:approve")
    del payload["channel"]
    assert parse_block_action(payload).channel_id == payload["container"]["channel_id"]


def test_answers_are_checked_against_the_stored_schema() -> None:
    # The stored schema is the authority: an option the schema does not allow is refused.
    rec = record("ask_user", {"question": "?", "options": ["a", "b"]}, {"enum": ["a"]})
    with pytest.raises(InvalidAnswer, match="Choose one of the options"):
        _resolve(rec, click(render_card(rec), "hb:option:1"))


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({}, id="empty"),
        pytest.param({"type": "view_submission"}, id="wrong-type"),
        pytest.param(
            {"type": "block_actions", "user": {"id": "U1"}, "actions": []}, id="no-actions"
        ),
        pytest.param(
            {
                "type": "block_actions",
                "user": {"id": "U1"},
                "actions": [{"action_id": "other_app", "block_id": "x", "value": "1"}],
            },
            id="not-ours",
        ),
        pytest.param(
            {
                "type": "block_actions",
                "user": {"id": "U1"},
                "actions": [{"action_id": "hb:approve", "block_id": "hb|" + "x" * 300 + "|a"}],
            },
            id="block-id-too-long",
        ),
        pytest.param(
            {
                "type": "block_actions",
                "user": {"id": "U1"},
                "actions": [
                    {"action_id": "hb:option:1", "block_id": "hb|abc|o", "value": "1" * 5000}
                ],
            },
            id="value-too-long",
        ),
        pytest.param(
            {
                "type": "block_actions",
                "user": "U1",
                "actions": [{"action_id": "hb:approve", "block_id": "hb|abc|a"}],
            },
            id="user-not-object",
        ),
    ],
)
def test_malformed_payloads_are_invalid_answers(payload: dict[str, Any]) -> None:
    with pytest.raises(InvalidAnswer):
        parse_block_action(payload)


def test_a_card_action_names_its_interaction_even_with_pipes() -> None:
    rec = ask("Which?", OPTIONS, interaction_id="run|weird|id")
    action = parse_block_action(click(render_card(rec), "hb:option:2"))
    assert action.interaction_id == "run|weird|id"
    assert resolve_answer(rec, action) == "sqlite 🚀"


def test_page_from_action_refuses_forged_pages() -> None:
    rec = ask("Which?", MANY)
    forged = CardAction(
        interaction_id=rec.interaction_id, action="hb:more", intent="page", value="9", user_id=USER
    )
    with pytest.raises(InvalidAnswer, match="no such page"):
        page_from_action(rec, forged)


ROUND_TRIPS = [
    pytest.param(name, text_id, id=f"{name}-{text_id}")
    for text_id, text in TEXTS.items()
    for name in adversarial_records(text)
]


def _expected(rec: InteractionRecord, action_id: str, picked: list[str]) -> Any:
    """What a click means, worked out from the stored record independently of `blocks`."""
    stored = rec.payload.get("options") or (rec.response_schema or {}).get("enum")
    if not stored:
        stored = ((rec.response_schema or {}).get("items") or {}).get("enum")
    base = ":".join(action_id.split(":")[:2])
    return {
        "hb:approve": lambda: True,
        "hb:deny": lambda: False,
        "hb:confirm": lambda: True,
        "hb:cancel": lambda: False,
        "hb:option": lambda: stored[int(action_id.split(":")[2])],
        "hb:select": lambda: stored[int(picked[0])],
        "hb:submit": lambda: [stored[int(i)] for i in sorted(map(int, set(picked)))],
    }[base]()


@pytest.mark.parametrize(("name", "text_id"), ROUND_TRIPS)
def test_every_control_of_every_card_round_trips(name: str, text_id: str) -> None:
    rec = adversarial_records(TEXTS[text_id])[name]
    for page in (0, 1):
        message = render_card(rec, page=page)
        stateful = {
            e["action_id"]: [o["value"] for o in e["options"][-2:]]
            for _, e in elements(message["blocks"])
            if e["type"] in ("checkboxes", "multi_static_select")
        }
        for _, element in elements(message["blocks"]):
            action_id = element["action_id"]
            picked = [element["options"][-1]["value"]] if "options" in element else []
            payload = click(message, action_id, option_values=picked, state=stateful)
            action = parse_block_action(payload)
            assert action.interaction_id == rec.interaction_id
            if action.intent != "answer":
                assert action.action in ("hb:answer", "hb:deny_reason", "hb:more", "hb:multi")
                continue
            ticked = stateful.get("hb:multi", [])
            expected = _expected(rec, action_id, picked or ticked)
            assert resolve_answer(rec, action) == expected
            if rec.response_schema is not None:
                jsonschema.validate(expected, rec.response_schema)
