"""Edit before approve in the playground, in headless Chromium: the demo's deploy card offers
"Edit and approve…", the form opens pre-filled, an invalid edit shows its error inline, and a
valid one deploys the edited version and says so in the thread."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.async_api import expect

from bot import chatops
from bot.playground import Playground

pytestmark = pytest.mark.browser

TIMEOUT = 15_000


async def _open(page: Any, playground: Playground, user: str) -> None:
    expect.set_options(timeout=TIMEOUT)
    await page.goto(f"{playground.url}?as={user}")
    await expect(page.locator("#conn.live")).to_be_visible()


def _field(modal: Any, label: str) -> Any:
    block = modal.locator(".input-block", has=modal.page.locator(".input-label", has_text=label))
    return block.locator("input, textarea, select").first


async def test_an_approver_edits_the_version_before_approving(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await _open(page, playground, "U0ALICE")
    await page.fill("#composer-input", "deploy api 2.3 to staging")
    await page.press("#composer-input", "Enter")
    card = page.locator("#thread .msg", has_text="Approval request")
    edit = card.get_by_role("button", name="Edit and approve…", exact=True)
    await expect(edit).to_be_visible()

    await page.select_option("#as", "U0BOB")
    await edit.click()
    modal = page.get_by_role("dialog", name="Edit and approve")
    await expect(modal).to_be_visible()
    version = _field(modal, "Version")
    await expect(version).to_have_value("2.3")

    await version.fill("")
    await modal.get_by_role("button", name="Approve", exact=True).click()
    await expect(modal.locator(".input-error")).to_have_text("Required")
    assert chatops.fleet.versions[("api", "staging")] == "1.4.2"

    await version.fill("2.4")
    await modal.get_by_role("button", name="Approve", exact=True).click()
    await expect(modal).to_have_count(0)
    thread = page.locator("#thread")
    await expect(thread).to_contain_text(
        "The approver changed the arguments: version '2.3' -> '2.4'"
    )
    await expect(thread).to_contain_text("Deployed api 2.4 to staging (was 1.4.2).")
    await expect(card).to_contain_text("Edited the arguments before approving")
    assert chatops.fleet.versions[("api", "staging")] == "2.4"
