"""The Block Kit checker the other tests rely on must itself fail on what Slack rejects."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackObjectFormationError

from ._slack import LimitError, check_message, check_view


def _message(*blocks: dict[str, Any], text: str = "fallback") -> dict[str, Any]:
    return {"text": text, "blocks": list(blocks)}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _button(text: str = "Go", value: str = "1", action_id: str = "hb:x") -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": value,
    }


def _select(count: int, label: str = "o") -> dict[str, Any]:
    return {
        "type": "static_select",
        "action_id": "hb:select",
        "placeholder": {"type": "plain_text", "text": "Pick"},
        "options": [
            {"text": {"type": "plain_text", "text": label}, "value": str(i)} for i in range(count)
        ],
    }


def _actions(*elements: dict[str, Any], block_id: str = "hb|x|a") -> dict[str, Any]:
    return {"type": "actions", "block_id": block_id, "elements": list(elements)}


def test_a_valid_message_passes() -> None:
    check_message(_message(_section("hello &lt;world&gt; <@U0ABC>"), _actions(_button())))


@pytest.mark.parametrize(
    "message",
    [
        pytest.param(_message(_section("x" * 3001)), id="section-3001"),
        pytest.param(
            _message(_actions(_button(), block_id="b" * 256)),
            id="block-id-256",
        ),
        pytest.param(
            _message({"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}),
            id="header-151",
        ),
        pytest.param(_message(_actions(_button("b" * 76))), id="button-76"),
        pytest.param(_message(_actions(_button(value="v" * 2001))), id="value-2001"),
        pytest.param(_message(_actions(_select(101))), id="101-options"),
        pytest.param(_message(_actions(_select(3, "o" * 76))), id="option-76"),
        pytest.param(_message(*[_section("x")] * 51), id="51-blocks"),
        pytest.param(_message(_actions(_button(), _button())), id="duplicate-action-id"),
        pytest.param(
            _message(_actions(_button(), block_id="a"), _actions(_button(), block_id="a")),
            id="duplicate-block-id",
        ),
        pytest.param(_message(_section("hi <!channel>")), id="channel-ping"),
        pytest.param(_message(_section("<https://evil|click>")), id="forged-link"),
        pytest.param(_message(_section("a & b")), id="bare-ampersand"),
        pytest.param(_message(_section("x"), text="<!here>"), id="fallback-ping"),
        pytest.param(
            _message({"type": "section", "txt": {"type": "mrkdwn", "text": "x"}}),
            id="misspelt-key",
        ),
        pytest.param(_message(_actions({**_button(), "colour": "red"})), id="unknown-key"),
    ],
)
def test_the_checker_rejects(message: dict[str, Any]) -> None:
    with pytest.raises((SlackObjectFormationError, LimitError)):
        check_message(message)


def _view(**changes: Any) -> dict[str, Any]:
    view = {
        "type": "modal",
        "callback_id": "hb:modal",
        "private_metadata": "abc",
        "title": {"type": "plain_text", "text": "Answer"},
        "submit": {"type": "plain_text", "text": "Submit"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": "hb|abc|v",
                "label": {"type": "plain_text", "text": "Your answer"},
                "element": {"type": "plain_text_input", "action_id": "hb:input"},
                "optional": False,
            }
        ],
    }
    view.update(changes)
    return view


def test_a_valid_view_passes() -> None:
    check_view(_view())


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"title": {"type": "plain_text", "text": "t" * 25}}, id="title-25"),
        pytest.param({"submit": {"type": "plain_text", "text": "s" * 25}}, id="submit-25"),
        pytest.param({"private_metadata": "p" * 3001}, id="metadata-3001"),
        pytest.param({"callback_id": "c" * 256}, id="callback-256"),
        pytest.param({"blocks": []}, id="no-blocks"),
    ],
)
def test_the_view_checker_rejects(changes: dict[str, Any]) -> None:
    with pytest.raises((SlackObjectFormationError, LimitError)):
        check_view(_view(**changes))
