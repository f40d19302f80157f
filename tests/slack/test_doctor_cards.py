"""`handback doctor` checks every card kind the bot will send: rendered at its extremes, checked
offline against the limit table LocalSlack enforces, and through `blocks.validate` with a token;
one line when all fit, one line per kind that does not."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

# The doctor's card checks are unit-tested here; the CLI that uses them is tests/cli/test_doctor.py.
from bot.slack._card_fit import CARD_KINDS, Sent, card_kinds
from bot.slack._doctor import Check, cards

from .._local_slack import TestSlack


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with TestSlack() as local:
        yield local


def _client(slack: TestSlack) -> AsyncWebClient:
    return AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)


def _lines(checks: list[Check]) -> list[str]:
    return [check.line() for check in checks]


def _section(chars: int) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": "x" * chars}}


BROKEN: dict[str, list[Sent]] = {
    "51 blocks": [Sent(surface="message", payload={"text": "x", "blocks": [_section(5)] * 51})],
    "long section": [Sent(surface="message", payload={"text": "x", "blocks": [_section(3001)]})],
    "25-character title": [
        Sent(
            surface="modal",
            payload={
                "type": "modal",
                "callback_id": "hb:modal",
                "title": {"type": "plain_text", "text": "t" * 25},
                "blocks": [_section(10)],
            },
        )
    ],
    "long update": [Sent(surface="update", payload={"text": "x" * 4001, "blocks": []})],
}


async def test_every_card_kind_fits_offline_and_in_slack(slack: TestSlack) -> None:
    assert sorted(card_kinds()) == sorted(CARD_KINDS)
    lines = _lines(await cards(_client(slack)))
    assert lines == [
        f"ok    cards: all {len(CARD_KINDS)} kinds fit Slack's limits (checked offline)",
        f"ok    cards in Slack: blocks.validate accepts all {len(CARD_KINDS)} kinds",
    ]
    validated = [call for call in slack.calls if call.method == "blocks.validate"]
    assert len(validated) == sum(len(sent) for sent in card_kinds().values())


async def test_without_a_token_the_cards_are_checked_offline_only() -> None:
    assert _lines(await cards(None)) == [
        f"ok    cards: all {len(CARD_KINDS)} kinds fit Slack's limits (checked offline)"
    ]


async def test_a_card_past_a_limit_is_one_line_naming_its_kind(slack: TestSlack) -> None:
    kinds = {**card_kinds(), **BROKEN}
    checks = await cards(_client(slack), kinds)
    failing = [check for check in checks if check.status == "FAIL"]
    offline = {c.name: c.detail for c in failing if not c.name.endswith(" in Slack")}
    in_slack = {c.name: c.detail for c in failing if c.name.endswith(" in Slack")}
    assert sorted(offline) == sorted(f"card `{name}`" for name in BROKEN)
    assert "must contain no more than 50 items" in offline["card `51 blocks`"]
    assert "msg_too_long" in offline["card `long update`"]
    assert "invalid_arguments" in offline["card `25-character title`"]
    # Slack's blocks.validate checks blocks, not chat.update's text: three kinds, not four.
    assert sorted(in_slack) == sorted(
        f"card `{name}` in Slack" for name in ("51 blocks", "long section", "25-character title")
    )
    assert "invalid_message" in in_slack["card `long section` in Slack"]
    assert "/blocks/0" in in_slack["card `long section` in Slack"]
    assert "invalid_view" in in_slack["card `25-character title` in Slack"]
    assert all(c.status == "FAIL" for c in checks)


async def test_a_workspace_that_does_not_check_them_is_a_warning(slack: TestSlack) -> None:
    slack.fail_next("blocks.validate", status=429, retry_after=30)
    checks = await cards(_client(slack))
    assert (
        checks[-1].line()
        == "warn  cards in Slack: blocks.validate did not check them (ratelimited)"
    )


async def test_blocks_validate_answers_as_slack_documents(slack: TestSlack) -> None:
    client = _client(slack)
    assert (await client.blocks_validate(blocks=[_section(10)]))["ok"]
    with pytest.raises(SlackApiError) as refused:
        await client.api_call(
            "blocks.validate", params={"blocks": "[]", "view": '{"type": "modal"}'}
        )
    assert refused.value.response.data == {
        "ok": False,
        "error": "invalid_arguments",
        "response_metadata": {
            "messages": ["must provide exactly one of `blocks`, `view`, or `message`"]
        },
    }
