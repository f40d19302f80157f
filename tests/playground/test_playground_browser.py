"""The playground in headless Chromium: a person types, clicks and fills modals like in Slack."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from bot import Agent, Tool, chatops
from bot.playground import Playground
from bot.testing import FunctionModel

from . import form_agent

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
    card = thread.locator(".msg", has_text="Approval request")
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

    # prod needs two approvers (the two-person rule): bob's approval is counted, the card
    # stays open for carol's.
    await act_as(page, "U0BOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(card).to_contain_text("1 of 2 approved: @bob")
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"
    await act_as(page, "U0CAROL")
    await card.get_by_role("button", name="Approve", exact=True).click()
    answered = thread.locator(".msg", has_text="Approved by @bob and @carol")
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

    card = thread.locator(".msg", has_text="Approval request")
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


async def test_a_users_agent_asks_for_a_form_in_a_modal(browser_page: Any, tmp_path: Path) -> None:
    async with Playground(form_agent.agent, environ={}) as playground:
        page = browser_page
        await open_page(page, playground)
        await expect(page.locator("#model")).to_have_text("model: scripted form")
        await expect(page.locator("#model.offline")).to_have_count(0)
        await say(page, "book a maintenance window")
        card = page.locator("#thread .msg", has_text="When should the maintenance window be?")
        await card.get_by_role("button", name="Answer").click()

        modal = page.get_by_role("dialog")
        await expect(modal).to_be_visible()
        minutes = modal.locator("input[type=number]")
        day = modal.locator("input[type=date]")
        environment = modal.locator("select")
        why = modal.locator("input[type=text], textarea")
        await expect(minutes).to_have_count(1)
        await minutes.fill("2")
        await day.fill("2030-01-15")
        await environment.select_option(label="staging")
        await why.fill("kernel <update>")
        await modal.locator("button[type=submit]").click()

        # The bot answers with an inline error under the number; what was typed stays.
        error = modal.locator(".input-block.invalid .input-error")
        await expect(error).to_have_count(1)
        await expect(modal.locator(".input-block.invalid input[type=number]")).to_have_count(1)
        await expect(day).to_have_value("2030-01-15")
        await expect(why).to_have_value("kernel <update>")
        await minutes.fill("30")
        await modal.locator("button[type=submit]").click()
        await expect(modal).to_have_count(0)
        await expect(page.locator("#thread")).to_contain_text(
            "Booked 30 minutes on 2030-01-15 in staging: kernel <update>"
        )
        await page.screenshot(path=str(tmp_path / "form.png"))


async def test_mrkdwn_and_block_kit_render_as_text_never_as_markup(
    playground: Playground, browser_page: Any
) -> None:
    from slack_sdk.web.async_client import AsyncWebClient

    assert playground.slack is not None
    slack = playground.slack
    client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
    hostile = "<img src=x onerror=window.__xss=1>"
    text = (
        "*bold* _italic_ ~gone~ `code` <https://example.com/docs|the docs> "
        "<javascript:window.__xss=1|click me> <@U0BOB> &lt;script&gt;window.__xss=1&lt;/script&gt; "
        f"{hostile} <!date^0^{{date_num}}|a date>\n```\n<b>not bold</b>\n```"
    )
    option = [
        {"text": {"type": "plain_text", "text": f"opt {n}"}, "value": f"v{n}"} for n in range(3)
    ]
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Header <i>plain</i>"}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": text},
            "fields": [
                {"type": "mrkdwn", "text": "*Field*"},
                {"type": "plain_text", "text": "*raw*"},
            ],
            "accessory": {
                "type": "button",
                "action_id": "x:a",
                "text": {"type": "plain_text", "text": "Go"},
            },
        },
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "context _note_"}]},
        {
            "type": "actions",
            "elements": [
                {
                    "type": "button",
                    "action_id": "x:p",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Yes"},
                },
                {
                    "type": "button",
                    "action_id": "x:d",
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "No"},
                },
                {"type": "static_select", "action_id": "x:s", "options": option},
                {"type": "multi_static_select", "action_id": "x:m", "options": option},
                {"type": "checkboxes", "action_id": "x:c", "options": option},
            ],
        },
    ]
    try:
        await client.chat_postMessage(channel="C0DEPLOYS", text="fallback", blocks=blocks)
    finally:
        await client.session.close() if client.session else None

    page = browser_page
    await open_page(page, playground)
    message = page.locator("#messages .msg").first
    await expect(message).to_contain_text("Header <i>plain</i>")
    section = message.locator(".b-section .mrkdwn").first
    await expect(section.locator("b")).to_have_text("bold")
    await expect(section.locator("i")).to_have_text("italic")
    await expect(section.locator("s")).to_have_text("gone")
    await expect(section.locator("code")).to_have_text("code")
    await expect(section.locator("pre")).to_have_text("<b>not bold</b>\n")
    await expect(section.locator("a")).to_have_count(1)
    await expect(section.locator("a")).to_have_attribute("href", "https://example.com/docs")
    await expect(section.locator(".mention")).to_have_text("@bob")
    await expect(section).to_contain_text("click me @bob <script>window.__xss=1</script>")
    await expect(section).to_contain_text("1970-01-01")
    await expect(section).to_contain_text(hostile.removeprefix("<").removesuffix(">"))
    assert await message.locator("img, script, i:text-is('plain')").count() == 0
    assert await page.evaluate("window.__xss") is None
    await expect(message.locator(".fields b")).to_have_text("Field")
    await expect(message.locator(".fields")).to_contain_text("*raw*")
    await expect(message.locator("hr.b-divider")).to_have_count(1)
    await expect(message.locator(".b-context i")).to_have_text("note")
    await expect(message.locator(".btn.primary")).to_have_text("Yes")
    await expect(message.locator(".btn.danger")).to_have_text("No")
    await expect(message.locator("select option")).to_have_count(4)
    await expect(message.locator("input[type=checkbox]")).to_have_count(6)


async def test_agent_session_in_the_browser(playground: Playground, browser_page: Any) -> None:
    """The thread shows the session's status chip, the request as its card alone (no task
    left pending beside it), the tool call as a complete task once approved, and the answer
    streamed into the thread."""
    page = browser_page
    await open_page(page, playground)
    await act_as(page, "U0ALICE")
    await say(page, "deploy api 2.3 to staging")

    thread = page.locator("#thread")
    chip = page.locator("#thread-status .chip")
    await expect(chip).to_have_attribute("data-status", "suspended")
    await expect(chip).to_contain_text("is waiting on someone")
    await expect(thread.locator(".msg", has_text="Approval request")).to_have_count(1)
    await expect(thread.locator(".task")).to_have_count(0)
    await expect(page.locator("#thread-status .stop")).to_have_count(0)

    await act_as(page, "U0BOB")
    card = thread.locator(".msg", has_text="Approval request")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(chip).to_have_attribute("data-status", "active")
    await expect(thread.locator(".task[data-status='complete']")).to_contain_text("deploy")
    await expect(thread).to_contain_text("Deployed api 2.3 to staging (was 1.4.2).")
    await expect(thread.locator(".cursor")).to_have_count(0)


class _Held:
    """A tool that waits until released, so the session stays `processing`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.ended = False

    async def restart(self, service: str) -> str:
        """Restart a service, slowly."""
        await self.release.wait()
        self.ended = True
        return f"restarted {service}"


async def test_the_stop_button_stops_the_turn(browser_page: Any) -> None:
    held = _Held()

    def script(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "restart", "arguments": {"service": "api"}}]

    agent = Agent(name="slow", model=FunctionModel(script), tools=[Tool(held.restart)])
    page = browser_page
    async with Playground(agent, environ={}) as playground:
        await open_page(page, playground)
        await act_as(page, "U0ALICE")
        await say(page, "restart api")
        chip = page.locator("#thread-status .chip")
        await expect(chip).to_have_attribute("data-status", "processing")
        await expect(page.locator("#thread .task[data-status='in_progress']")).to_contain_text(
            "restart"
        )
        await page.locator("#thread-status .stop").click()
        await expect(chip).to_have_attribute("data-status", "active")
        await expect(page.locator("#thread")).to_contain_text(
            "Stopped by @alice: restart was interrupted while it ran"
        )
        await expect(page.locator("#thread-status .stop")).to_have_count(0)
        held.release.set()
        await asyncio.sleep(0.1)
        assert not held.ended


async def test_a_slash_command_typed_in_the_composer(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground)
    await act_as(page, "U0ALICE")
    # Missing arguments: the tool's form opens, with the service that was typed already chosen.
    await page.fill("#composer-input", "/deploy web")
    await page.press("#composer-input", "Enter")
    modal = page.get_by_role("dialog")
    await expect(modal).to_be_visible()
    await expect(modal).to_contain_text("Missing")
    service, environment = modal.locator("select").first, modal.locator("select").nth(1)
    await expect(service.locator("option:checked")).to_have_text("web")
    await modal.locator("input[type=text], textarea").first.fill("2.1")
    await environment.select_option(label="staging")
    await modal.locator("button[type=submit]").click()
    await expect(modal).to_have_count(0)
    thread = page.locator("#thread")
    await expect(thread.locator(".thread-parent")).to_contain_text(
        "ran /deploy service=web version=2.1 environment=staging"
    )
    card = thread.locator(".msg", has_text="Approval request")
    await act_as(page, "U0BOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(thread).to_contain_text("Deployed web 2.1 to staging (was 2.0.1).")
    assert chatops.fleet.versions[("web", "staging")] == "2.1"


async def test_app_home_lists_the_request_and_approves_it(
    playground: Playground, browser_page: Any
) -> None:
    page = browser_page
    await open_page(page, playground)
    await act_as(page, "U0ALICE")
    await say(page, "deploy api 2.3 to staging")
    await expect(page.locator("#thread .msg", has_text="Approval request")).to_be_visible()

    await act_as(page, "U0BOB")
    await page.click("#home-tab")
    home = page.locator("#home")
    await expect(home).to_be_visible()
    await expect(page.locator("#composer")).to_be_hidden()
    await expect(home).to_contain_text("Waiting on you")
    await expect(home.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    # The thread link opens the request's thread, as in Slack.
    await home.get_by_role("link", name="Open the thread").click()
    await expect(page.locator("#home")).to_be_hidden()
    await expect(page.locator("#thread .msg", has_text="Approval request")).to_be_visible()

    await page.click("#home-tab")
    await home.get_by_role("button", name="Approve", exact=True).click()
    await expect(home).to_contain_text("Nothing waits on you now.")
    await expect(home).to_contain_text("Approved deploy")
    assert chatops.fleet.versions[("api", "staging")] == "2.3"
    await page.locator("#channels li", has_text="deploys").click()
    await expect(page.locator("#thread")).to_be_hidden()
    await expect(page.locator("#messages")).to_be_visible()
