"""People on the playground's page, in headless Chromium: two tabs act as two people live, a
reload keeps the pending card, a modal pick shows no error, and no one can act as the bot."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from playwright.async_api import expect

from bot import chatops
from bot.playground import Playground

from . import form_agent
from .conftest import (
    PageClient,
    card_with,
    open_page,
    say,
)


@pytest.mark.browser
async def test_picking_in_a_modal_shows_no_error(playground: Playground, browser_page: Any) -> None:
    async with Playground(form_agent.agent, environ={}) as form_playground:
        page = browser_page
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        await open_page(page, form_playground.url)
        await say(page, "book a maintenance window")
        card = page.locator("#thread .msg", has_text="When should the maintenance window be?")
        await card.get_by_role("button", name="Answer").click()
        modal = page.get_by_role("dialog")
        await expect(modal).to_be_visible()
        # A reload with the modal open shows it again: views live in the workspace.
        await page.reload()
        await expect(page.locator("#conn.live")).to_be_visible()
        await modal.locator("select").select_option(label="staging")
        await modal.locator("input[type=date]").fill("2030-01-15")
        # Slack sends nothing for an input block's element unless it asks to dispatch actions.
        await modal.locator("input[type=number]").fill("30")
        await modal.locator("input[type=text], textarea").fill("kernel")
        # Anything the changes above sent has been answered by the time the form is.
        await modal.locator("button[type=submit]").click()
        await expect(modal).to_have_count(0)
        await page.locator("#messages .replies").first.click()
        await expect(page.locator("#thread")).to_contain_text("Booked 30 minutes on 2030-01-15")
        assert await page.locator("#toast").is_hidden()
        assert failed == []


@pytest.mark.browser
async def test_two_tabs_act_as_two_people_live(playground: Playground, browser_page: Any) -> None:
    alice = browser_page
    bob = await alice.context.new_page()
    await open_page(alice, playground.url + "?as=U0ALICE")
    await open_page(bob, playground.url + "?as=U0BOB")
    await say(alice, "deploy api 2.3 to staging")  # one approver (prod needs two)

    # bob's tab sees alice's request live, opens the thread and approves there.
    await expect(bob.locator("#messages")).to_contain_text("deploy api 2.3 to staging")
    await bob.locator("#messages .replies").first.click()
    bob_card = bob.locator("#thread .msg", has_text="Approval request")
    alice_card = alice.locator("#thread .msg", has_text="Approval request")
    await expect(alice_card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    # alice may not approve her own request; only she is told.
    await alice_card.get_by_role("button", name="Approve", exact=True).click()
    await expect(alice.locator(".msg.ephemeral")).to_have_count(1)
    await bob_card.get_by_role("button", name="Approve", exact=True).click()
    for tab in (alice, bob):
        await expect(tab.locator("#thread")).to_contain_text("Approved by @bob")
        await expect(tab.locator("#thread")).to_contain_text("Deployed api 2.3 to staging")
    await expect(bob.locator(".msg.ephemeral")).to_have_count(0)
    assert chatops.fleet.versions[("api", "staging")] == "2.3"
    await bob.close()


@pytest.mark.browser
async def test_a_reload_mid_flow_keeps_the_pending_card(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground.url + "?as=U0ALICE")
    await say(page, "deploy web to staging")
    await expect(page.locator("#thread")).to_contain_text("Which version of web")
    await page.reload()
    await expect(page.locator("#conn.live")).to_be_visible()
    await expect(page.locator("#as")).to_have_value("U0ALICE")
    await page.locator("#messages .replies").first.click()
    question = page.locator("#thread .msg", has_text="Which version of web")
    await question.locator("select").select_option(label="2.2")
    card = page.locator("#thread .msg", has_text="Approval request")
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    # The live feed is down across a reload: the page says so, and catches up once it is back.
    async def drop(route: Any) -> None:
        await route.abort()

    await page.route("**/api/events", drop)
    await page.reload()
    await expect(page.locator("#conn")).to_have_text("reconnecting…")
    await page.locator("#messages .replies").first.click()
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    status, _ = await _click_as(playground, "U0CAROL", "Approval request", "hb:approve")
    assert status == 200
    await page.unroute("**/api/events", drop)
    await expect(page.locator("#conn.live")).to_be_visible()
    await expect(page.locator("#thread")).to_contain_text("Approved by @carol")
    await expect(page.locator("#thread")).to_contain_text("Deployed web 2.2 to staging")


async def _click_as(
    playground: Playground, user: str, text: str, action_id: str
) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session:
        client = PageClient(session, playground.url)
        state = await client.state(user)
        card = card_with(state, action_id, text)
        assert card is not None
        return await client.post(
            "/api/actions",
            {
                "user": user,
                "channel": card["channel"],
                "message_ts": card["ts"],
                "action": {"action_id": action_id, "type": "button", "value": "approve"},
            },
        )


@pytest.mark.browser
async def test_the_page_cannot_be_made_to_act_as_the_bot(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground.url + "?as=U0HANDBACK")
    await expect(page.locator("#as")).to_have_value("U0ALICE")
    await say(page, "status")
    await expect(page.locator("#thread")).to_contain_text("Here is what runs where")
    assert await page.locator("#toast").is_hidden()
