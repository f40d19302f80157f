"""The playground in headless Chromium: a person types, clicks and fills modals like in Slack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from bot import chatops
from bot.playground import Playground

pytestmark = pytest.mark.browser

TIMEOUT = 15_000


async def open_page(page: Any, playground: Playground) -> None:
    expect.set_options(timeout=TIMEOUT)
    await page.goto(playground.url)
    await expect(page.locator("#conn.live")).to_be_visible()


async def act_as(page: Any, user: str) -> None:
    await page.select_option("#as", user)
    await expect(page.locator(f"#people li.active[data-user='{user}']")).to_be_visible()


async def say(page: Any, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")
    await expect(page.locator("#thread .thread-parent")).to_contain_text(text)


async def test_deploy_approved_in_the_browser(
    playground: Playground, browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    await open_page(page, playground)
    await expect(page.locator("#model")).to_have_text("offline demo model")
    await act_as(page, "U0ALICE")
    await say(page, "deploy api 2.3 to prod")

    thread = page.locator("#thread")
    card = thread.locator(".msg", has_text="Approval needed")
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    await expect(card).to_contain_text("Requested by: @alice")

    # alice asked, so she may not approve; dave is not an approver. Each sees only their refusal.
    await card.get_by_role("button", name="Approve", exact=True).click()
    mine = page.locator(".msg.ephemeral", has_text="someone else has to approve it")
    await expect(mine).to_be_visible()
    await act_as(page, "U0DAVE")
    await expect(mine).to_have_count(0)
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(page.locator(".msg.ephemeral", has_text="not on the list")).to_be_visible()
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"

    await act_as(page, "U0BOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    answered = thread.locator(".msg", has_text="Approved by @bob")
    await expect(answered).to_be_visible()
    await expect(answered.get_by_role("button")).to_have_count(0)
    await expect(thread).to_contain_text("Deployed api 2.3 to prod (was 1.4.2).")
    assert chatops.fleet.versions[("api", "prod")] == "2.3"
    await page.screenshot(path=str(tmp_path / "approved.png"))
    assert (tmp_path / "approved.png").stat().st_size > 10_000


async def test_select_then_modal_in_the_browser(
    playground: Playground, browser_page: Any, tmp_path: Path
) -> None:
    page = browser_page
    await open_page(page, playground)
    await act_as(page, "U0ALICE")
    await say(page, "deploy web to staging")

    thread = page.locator("#thread")
    question = thread.locator(".msg", has_text="Which version of web should go to staging?")
    select = question.locator("select")
    await expect(select).to_be_visible()
    await select.select_option(label="2.2.1")
    await expect(question).to_contain_text("2.2.1")
    await expect(question.locator("select")).to_have_count(0)

    card = thread.locator(".msg", has_text="Approval needed")
    await act_as(page, "U0CAROL")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(thread).to_contain_text("Deployed web 2.2.1 to staging")

    # A free-text question: answered in a modal, with the bot's inline errors on a bad submit.
    await act_as(page, "U0ALICE")
    await page.locator("#thread-close").click()
    await say(page, "write a release note")
    note = thread.locator(".msg", has_text="What changed in this release?")
    await note.get_by_role("button").first.click()
    modal = page.get_by_role("dialog")
    await expect(modal).to_be_visible()
    text_box = modal.locator("input[type=text], textarea").first
    await modal.locator("button[type=submit]").click()
    await expect(modal.locator(".input-error")).to_be_visible()
    await text_box.fill("Faster deploys & fewer <b>bugs</b>")
    await modal.locator("button[type=submit]").click()
    await expect(modal).to_have_count(0)
    await expect(thread).to_contain_text("Faster deploys & fewer <b>bugs</b>")
    # Typed markup stays text.
    assert await page.locator("#thread b:text-is('bugs')").count() == 0
    await page.screenshot(path=str(tmp_path / "modal.png"))
