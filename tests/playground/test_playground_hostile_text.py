"""Text we did not write (names, messages, arguments, answers) is inert everywhere on the
playground's page, in headless Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect
from slack_sdk.errors import SlackApiError

from bot.playground import Playground

from .conftest import open_page

CHANNEL = "C0DEPLOYS"


PWN = "window.__pwned=1"


HOSTILE = f"<img src=x onerror={PWN}><script>{PWN}</script>"


async def assert_not_pwned(page: Any) -> None:
    assert await page.evaluate("window.__pwned") is None
    assert await page.locator("img, script:not([src]), iframe, object, embed").count() == 0
    for href in await page.locator("a").evaluate_all("(links) => links.map((a) => a.href)"):
        assert href.startswith(("http:", "https:", "mailto:")), href


@pytest.mark.browser
async def test_hostile_text_is_inert_everywhere_on_the_page(
    playground: Playground, browser_page: Any
) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    slack = playground.slack
    assert slack is not None
    slack.add_user("U0MALLORY", HOSTILE)
    slack.add_channel("C0EVIL", HOSTILE)
    options = [
        {"text": {"type": "plain_text", "text": f"{HOSTILE} {n}"}, "value": f"<b>{n}</b>"}
        for n in range(3)
    ]
    mrkdwn = (
        f"{HOSTILE} <javascript:{PWN}|click> <JavaScript:{PWN}> <data:text/html,<b>x</b>|d> "
        f"<!date^1700000000^{{date}}|<img src=x onerror={PWN}>> "
        f"<!date^x^<img src=x onerror={PWN}>|y> <@U0MALLORY> <#C0EVIL> "
        f"<@U0BOB|<img src=x onerror={PWN}>> <!subteam^S1|<img src=x onerror={PWN}>> "
        f"`<img src=x onerror={PWN}>` *<img src=x onerror={PWN}>* :<img>: "
        f"```{HOSTILE}``` &lt;img src=x onerror={PWN}&gt;"
    )
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": HOSTILE}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": mrkdwn},
            "fields": [
                {"type": "mrkdwn", "text": HOSTILE},
                {"type": "plain_text", "text": HOSTILE},
            ],
            "accessory": {
                "type": "button",
                "action_id": "x:url",
                "text": {"type": "plain_text", "text": HOSTILE},
                "url": f"javascript:{PWN}",
            },
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": HOSTILE}]},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "static_select",
                    "action_id": "x:s",
                    "options": options,
                    "placeholder": {"type": "plain_text", "text": HOSTILE},
                },
                {"type": "checkboxes", "action_id": "x:c", "options": options},
                {"type": "overflow", "action_id": "x:o", "options": options},
            ],
        },
        {"type": "image", "image_url": "https://example.com/x.png", "alt_text": HOSTILE},
    ]
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    view = {
        "type": "modal",
        "callback_id": "x",
        "title": {"type": "plain_text", "text": HOSTILE[:24]},
        "submit": {"type": "plain_text", "text": HOSTILE[:24]},
        "close": {"type": "plain_text", "text": HOSTILE[:24]},
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}},
            {
                "type": "input",
                "block_id": f"<img src=x onerror={PWN}>",
                "label": {"type": "plain_text", "text": HOSTILE},
                "hint": {"type": "plain_text", "text": HOSTILE},
                "element": {
                    "type": "plain_text_input",
                    "action_id": "x:t",
                    "placeholder": {"type": "plain_text", "text": HOSTILE},
                    "initial_value": HOSTILE,
                },
            },
            {
                "type": "input",
                "label": {"type": "plain_text", "text": "pick"},
                "element": {"type": "static_select", "action_id": "x:m", "options": options},
            },
        ],
    }
    try:
        # A block of a type Slack does not know is refused, as Slack refuses it: the page never
        # has to render one.
        with pytest.raises(SlackApiError) as refused:
            await client.chat_postMessage(
                channel=CHANNEL, text=mrkdwn, blocks=[{"type": f"<img src=x onerror={PWN}>"}]
            )
        assert refused.value.response["error"] == "invalid_blocks"
        posted = await client.chat_postMessage(channel=CHANNEL, text=mrkdwn, blocks=blocks)
        await client.chat_postMessage(channel=CHANNEL, text=mrkdwn, thread_ts=posted["ts"])
        await client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text=mrkdwn)
        slack.triggers["1.hostile"] = "U0ALICE"
        await client.views_open(trigger_id="1.hostile", view=view)
    finally:
        await client.session.close() if client.session else None

    page = browser_page
    await open_page(page, playground.url + "?as=U0ALICE")
    await expect(page.get_by_role("dialog")).to_be_visible()
    dialog = page.get_by_role("dialog")
    await expect(dialog.locator("textarea, input[type=text]")).to_have_value(HOSTILE)
    await expect(dialog).to_contain_text(HOSTILE)
    await assert_not_pwned(page)
    await dialog.get_by_role("button", name=HOSTILE[:24]).first.click()
    await expect(page.locator("#messages")).to_contain_text(HOSTILE)
    await expect(page.locator("#messages .ephemeral")).to_have_count(1)
    await page.locator("#messages .replies").first.click()
    await expect(page.locator("#thread")).to_contain_text("click")
    # The javascript: button opens nothing and runs nothing.
    await page.locator("#messages [data-action-id='x:url']").click()
    await page.locator("#messages select[data-action-id='x:s']").select_option(index=1)
    await page.locator("#as").select_option("U0MALLORY")
    await expect(page.locator("#people li.active")).to_contain_text(HOSTILE)
    await assert_not_pwned(page)
    assert len(page.context.pages) == 1
