"""What a first-time user meets on the page, in headless Chromium: the thread pane closes and
the composer says where it posts, every message shows its own time, Slack's date tokens read as
in Slack, and the page works 420 px wide."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from playwright.async_api import expect

from bot import chatops
from bot.playground import Playground

pytestmark = pytest.mark.browser

TIMEOUT = 15_000

NewPage = Callable[..., Awaitable[Any]]


@pytest.fixture
def new_page(browser_page: Any) -> Iterator[NewPage]:
    """A page in a context of its own (viewport, locale) on the test's Chromium; it fails the
    test if the page's script raises."""
    browser = browser_page.context.browser
    errors: list[str] = []

    async def make(*, width: int = 1400, height: int = 900, locale: str = "en-US") -> Any:
        context = await browser.new_context(
            viewport={"width": width, "height": height}, timezone_id="UTC", locale=locale
        )
        page = await context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        return page

    yield make
    assert errors == [], f"the page raised: {errors}"


async def open_page(page: Any, playground: Playground, user: str = "U0ALICE") -> None:
    expect.set_options(timeout=TIMEOUT)
    await page.goto(f"{playground.url}?as={user}")
    await expect(page.locator("#conn.live")).to_be_visible()


async def say(page: Any, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")
    await expect(page.locator("#thread .thread-parent")).to_contain_text(text)


async def bot_post(playground: Playground, text: str) -> str:
    """Post `text` in #deploys as the bot, over the Web API; its ts."""
    from slack_sdk.web.async_client import AsyncWebClient

    assert playground.slack is not None
    client = AsyncWebClient(token=playground.slack.bot_token, base_url=playground.slack.api_url)
    try:
        response = await client.chat_postMessage(channel="C0DEPLOYS", text=text)
    finally:
        if client.session is not None:
            await client.session.close()
    return str(response["ts"])


async def overflowing(page: Any) -> list[str]:
    """Shown elements that stick out of the viewport sideways (none may: nothing to scroll to)."""
    return list(
        await page.evaluate(
            """() => {
              const root = document.documentElement;
              const width = root.clientWidth;
              const out = [];
              if (root.scrollWidth > width) out.push(`page ${root.scrollWidth}`);
              for (const node of document.querySelectorAll("body *")) {
                const box = node.getBoundingClientRect();
                if (!box.width || !box.height || node.closest("[hidden]")) continue;
                if (box.left < -1 || box.right > width + 1) {
                  const where = `${Math.round(box.left)}..${Math.round(box.right)}`;
                  out.push(`${node.tagName}.${node.className} ${where}`);
                }
              }
              return out;
            }"""
        )
    )


async def test_the_thread_pane_closes_and_the_composer_says_where_it_posts(
    playground: Playground, new_page: NewPage
) -> None:
    page = await new_page()
    await open_page(page, playground)
    await say(page, "status")
    pane = page.locator("#thread")
    await expect(pane).to_be_visible()
    await expect(page.locator("#thread-input")).to_be_visible()
    await expect(page.locator("#thread-channel")).to_have_text("#deploys")
    await expect(page.locator("#thread-to")).to_have_text("Replies stay in this thread.")
    # The channel marks the message whose thread is open.
    await expect(page.locator("#messages .msg.open")).to_contain_text("status")

    await page.locator("#thread-close").click()
    await expect(pane).to_be_hidden()
    # The thread's composer went with it: there is nothing left to type a reply into.
    await expect(page.locator("#thread-input")).to_be_hidden()
    await expect(page.locator("#messages .msg.open")).to_have_count(0)
    # What stays says plainly that it starts something new in the channel.
    await expect(page.locator("#composer-to")).to_have_text(
        "To #deploys: a new request to @handback, in its own thread."
    )
    await expect(page.locator("#composer-input")).to_have_attribute(
        "placeholder", "Message #deploys, e.g. deploy api 2.3 to prod"
    )

    # Even a reply sent from the hidden thread form (a script, a stale tab) posts nothing.
    assert playground.slack is not None
    before = len(playground.slack.messages)
    await page.evaluate(
        """() => {
          document.getElementById("thread-input").value = "yes";
          document.getElementById("thread-composer").requestSubmit();
        }"""
    )
    await expect(page.locator("#toast")).to_have_text("Open a thread to reply in it.")
    assert len(playground.slack.messages) == before

    # Opening the thread again brings the pane and its composer back.
    await page.locator("#messages .replies").first.click()
    await expect(pane).to_be_visible()
    await expect(page.locator("#thread-input")).to_be_visible()


async def test_each_message_shows_the_time_it_was_posted(
    playground: Playground, new_page: NewPage
) -> None:
    assert playground.slack is not None
    slack = playground.slack
    posted = time.time()
    now_ts = await bot_post(playground, "posted now")
    # A message's ts is when it was posted, not when the workspace started.
    assert abs(float(now_ts) - posted) < 5
    morning = datetime(2030, 1, 15, 9, 41, 7, tzinfo=UTC)
    evening = datetime(2030, 1, 15, 17, 5, 0, tzinfo=UTC)
    slack.clock = morning.timestamp
    morning_ts = await bot_post(playground, "posted in the morning")
    slack.clock = evening.timestamp
    evening_ts = await bot_post(playground, "posted in the evening")
    assert float(morning_ts) == morning.timestamp()
    assert float(evening_ts) == evening.timestamp()

    page = await new_page(locale="en-US")
    await open_page(page, playground)
    messages = page.locator("#messages .msg")
    await expect(messages).to_have_count(3)
    now_shown = datetime.fromtimestamp(float(now_ts), tz=UTC).strftime("%-I:%M %p")
    await expect(messages.nth(0).locator(".msg-time")).to_have_text(now_shown)
    await expect(messages.nth(1).locator(".msg-time")).to_have_text("9:41 AM")
    await expect(messages.nth(2).locator(".msg-time")).to_have_text("5:05 PM")
    await expect(messages.nth(1).locator(".msg-time")).to_have_attribute(
        "title", "Tuesday, January 15, 2030 at 9:41:07 AM"
    )


@pytest.mark.parametrize(
    ("locale", "at"),
    [
        ("en-GB", {"today": "14:05", "old": "14:05"}),
        ("en-US", {"today": "2:05 PM", "old": "2:05 PM"}),
    ],
)
async def test_slack_date_tokens_read_as_in_slack(
    playground: Playground, new_page: NewPage, locale: str, at: dict[str, str]
) -> None:
    today = datetime.now(UTC).replace(hour=14, minute=5, second=0, microsecond=0)
    old = datetime(2024, 12, 1, 14, 5, tzinfo=UTC)
    day = 86_400
    fmt = "{date_short_pretty} at {time}"
    tokens = {
        "today": f"<!date^{int(today.timestamp())}^{fmt}|fallback>",
        "yesterday": f"<!date^{int(today.timestamp()) - day}^{fmt}|fallback>",
        "tomorrow": f"<!date^{int(today.timestamp()) + day}^{fmt}|fallback>",
        "old": f"<!date^{int(old.timestamp())}^{fmt}|fallback>",
        "long": f"<!date^{int(old.timestamp())}^{{date_long}} · {{date}} · {{date_num}}|fallback>",
        "full": f"<!date^{int(old.timestamp())}^{{date_long_full}}|fallback>",
        "link": f"<!date^{int(old.timestamp())}^{{date_short}}^https://example.com/x|fallback>",
        "bad": "<!date^soon^{date_short}|the fallback>",
    }
    for name, token in tokens.items():
        await bot_post(playground, f"{name}: Approved by <@U0BOB> {token}")

    page = await new_page(locale=locale)
    await open_page(page, playground)
    shown = page.locator("#messages .msg .mrkdwn")
    expected = {
        "today": f"today at {at['today']}",
        "yesterday": f"yesterday at {at['today']}",
        "tomorrow": f"tomorrow at {at['today']}",
        "old": f"Dec 1, 2024 at {at['old']}",
        "long": "Sunday, December 1st, 2024 · December 1st, 2024 · 2024-12-01",
        "full": "December 1, 2024",
        "link": "Dec 1, 2024",
        "bad": "the fallback",
    }
    for index, (name, words) in enumerate(expected.items()):
        await expect(shown.nth(index)).to_have_text(f"{name}: Approved by @bob {words}")
    await expect(shown.nth(6).locator("a")).to_have_attribute("href", "https://example.com/x")


async def test_usable_at_420_px_wide(playground: Playground, new_page: NewPage) -> None:
    page = await new_page(width=420, height=800)
    await open_page(page, playground)
    await expect(page.locator("#messages")).to_be_visible()
    await expect(page.locator("#composer-input")).to_be_visible()
    await expect(page.locator("#channels li", has_text="deploys")).to_be_visible()
    await expect(page.locator(".hint .example").first).to_be_visible()
    assert await overflowing(page) == []

    # staging: one approver (prod needs two).
    await say(page, "deploy api 2.3 to staging")
    thread = page.locator("#thread")
    await expect(thread).to_be_in_viewport(ratio=1)
    card = thread.locator(".msg", has_text="Approval request")
    approve = card.get_by_role("button", name="Approve", exact=True)
    for button in ("Approve", "Deny", "Deny with reason…"):
        await expect(card.get_by_role("button", name=button, exact=True)).to_be_in_viewport(ratio=1)
    await expect(page.locator("#thread-input")).to_be_in_viewport(ratio=1)
    assert await overflowing(page) == []

    # The person picker stays in reach; bob approves from the narrow thread.
    await page.select_option("#as", "U0BOB")
    await approve.click()
    await expect(thread).to_contain_text("Deployed api 2.3 to staging (was 1.4.2).")
    # The card kept its title; only its status line changed, and it reads as Slack would.
    answered = thread.locator(".msg", has_text="Approved by @bob")
    await expect(answered.locator(".b-header")).to_have_text("Approval request")
    await expect(answered).to_contain_text("Approved by @bob today at")
    assert chatops.fleet.versions[("api", "staging")] == "2.3"
    await page.fill("#thread-input", "thanks")
    await page.press("#thread-input", "Enter")
    await expect(thread.locator(".msg", has_text="thanks")).to_be_visible()
    assert await overflowing(page) == []

    await page.locator("#thread-close").click()
    await expect(thread).to_be_hidden()
    await expect(page.locator("#messages .msg").first).to_be_in_viewport()
    await expect(page.locator("#composer-input")).to_be_in_viewport(ratio=1)
    assert await overflowing(page) == []


async def test_escape_closes_a_modal_as_cancel_does(
    playground: Playground, new_page: NewPage
) -> None:
    page = await new_page(width=420, height=800)
    await open_page(page, playground, user="U0BOB")
    await page.fill("#composer-input", "deploy api 2.3 to prod")
    await page.press("#composer-input", "Enter")
    card = page.locator("#thread .msg", has_text="Approval request")
    await card.get_by_role("button", name="Deny with reason…").click()
    modal = page.get_by_role("dialog")
    await expect(modal).to_be_in_viewport(ratio=1)
    await page.keyboard.press("Escape")
    await expect(modal).to_have_count(0)
    assert playground.slack is not None
    assert not any(not view.closed for view in playground.slack.views.values())
    # The request is still open: Escape answered nothing.
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
