"""The playground with the bundled example MCP server (`bot/playground/example_mcp.py`, run as
`python -m bot.playground.example_mcp` over stdio), offline: the demo model plays the example's
script. An approval card runs `deploy` once on the server's side; the server's question
(form elicitation, current protocol) is a card whose answer reaches the server; `status`
runs without a card. Counted on the server's side (`$HANDBACK_EXAMPLE_LOG`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from blocks import ACTION_APPROVE, ACTION_OPTION
from bot import agent_from_file
from bot.mcp import MCPServer
from bot.playground import Playground, example_agent, example_reply
from bot.playground.example_mcp import LOG_VARIABLE

from ..mcp.conftest import until
from .conftest import PageClient, bot_replies
from .dev_process import offline_env, read_url, start_dev, stop_dev

pytestmark = pytest.mark.slow

EXAMPLE_FILE = Path(__file__).resolve().parents[2] / "examples" / "handback.toml"


def _calls(log: Path, tool: str) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [line["arguments"] for line in lines if line["tool"] == tool]


async def test_the_example_servers_approval_and_question_cards_work_in_the_playground(
    tmp_path: Path, sqlite_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "example.log"
    monkeypatch.setenv(LOG_VARIABLE, str(log))
    agent = example_agent()
    async with Playground(agent, environ={}, store_url=sqlite_store_url) as playground:
        slack, bot = playground.slack, playground.bot
        assert slack is not None and bot is not None
        assert playground.offline and playground.script is example_reply
        assert {"example_status", "example_deploy", "example_incident"} <= set(agent.tools)

        def said(ts: str) -> list[str]:
            return [m.text for m in slack.bot_messages(thread_ts=ts) if not m.blocks]

        def cards(ts: str) -> list[Any]:
            return [m for m in slack.bot_messages(thread_ts=ts) if m.blocks]

        # Read-only: no card, the answer at once.
        asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "status")
        await bot.drain()
        await until(lambda: any("api 2.3" in text for text in said(asked.ts)))
        assert cards(asked.ts) == []

        # Destructive: a card; nothing reaches the server before the click, once after it.
        asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "deploy api 2.4")
        await bot.drain()
        await until(lambda: bool(cards(asked.ts)))
        [card] = cards(asked.ts)
        assert "*MCP server:* `example`" in str(card.blocks)
        assert _calls(log, "deploy") == []
        await slack.click("U0BOB", card.ts, ACTION_APPROVE)
        await bot.drain()
        done = "The example server said: deployed api 2.4 (was 2.3)"
        await until(lambda: done in said(asked.ts))
        assert _calls(log, "deploy") == [{"service": "api", "version": "2.4"}]

        # The server's question: a card, and the answer reaches the server as given.
        asked = await slack.post_user_message("U0ALICE", "C0GENERAL", "incident on web")
        await bot.drain()
        await until(lambda: bool(cards(asked.ts)))
        [card] = cards(asked.ts)
        assert "Question from an MCP server" in str(card.blocks)
        assert "How severe is the incident on web?" in str(card.blocks)
        await slack.click("U0ALICE", card.ts, f"{ACTION_OPTION}:1", value="1")
        await bot.drain()
        opened = "The example server said: opened a sev2 incident for web"
        await until(lambda: opened in said(asked.ts))
        rounds = _calls(log, "incident")
        assert [r["state"] for r in rounds] == [None, "incident:web"]
        assert rounds[-1]["answer"] == {"action": "accept", "content": {"severity": "sev2"}}
    assert _calls(log, "deploy") == [{"service": "api", "version": "2.4"}]  # once, still


def test_the_example_config_file_runs_the_example_server() -> None:
    agent = agent_from_file(EXAMPLE_FILE)
    # What the playground checks to let the offline model play the example's script.
    assert any(
        isinstance(toolset, MCPServer)
        and list(toolset.command[-2:]) == ["-m", "bot.playground.example_mcp"]
        for toolset in agent.toolsets
    )
    assert agent.channel_rules is not None
    found, rule = agent.channel_rules.rule("C0GENERAL", "example_deploy")
    assert found and getattr(rule, "count", None) == 2


async def test_handback_dev_example_mcp_serves_the_example_server(tmp_path: Path) -> None:
    log = tmp_path / "calls" / "example.log"
    log.parent.mkdir()
    process = await start_dev(
        "--example-mcp", cwd=tmp_path, env=offline_env(**{LOG_VARIABLE: str(log)})
    )
    try:
        url = await read_url(process)
        async with aiohttp.ClientSession() as session:
            page = PageClient(session, url)
            status, sent = await page.post(
                "/api/messages",
                {"user": "U0ALICE", "channel": "C0DEPLOYS", "text": "deploy web 2.0"},
            )
            assert status == 200, sent
            card = await page.wait_for(
                "U0BOB", lambda s: next(iter(bot_replies(s, "hb:approve")), None)
            )
            assert "`example`" in json.dumps(card["blocks"])
            assert _calls(log, "deploy") == []
            status, clicked = await page.post(
                "/api/actions",
                {
                    "user": "U0BOB",
                    "channel": "C0DEPLOYS",
                    "message_ts": card["ts"],
                    "action": {"action_id": ACTION_APPROVE, "type": "button", "value": "approve"},
                },
            )
            assert (status, clicked["ok"]) == (200, True)
            await page.wait_for(
                "U0ALICE", lambda s: next(iter(bot_replies(s, "deployed web 2.0 (was 1.9)")), None)
            )
    finally:
        out, err = await stop_dev(process, seconds=30)
    assert process.returncode == 0, err
    assert "--example-mcp" in out
    assert "the demo model scripts the chat-ops" not in out
    assert _calls(log, "deploy") == [{"service": "web", "version": "2.0"}]


@pytest.mark.browser
async def test_the_example_servers_cards_in_the_browser(
    browser_page: Any, tmp_path: Path, sqlite_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from playwright.async_api import expect

    from .test_playground_browser import act_as, open_page, say

    log = tmp_path / "example.log"
    monkeypatch.setenv(LOG_VARIABLE, str(log))
    async with Playground(example_agent(), environ={}, store_url=sqlite_store_url) as playground:
        page = browser_page
        await open_page(page, playground)
        await act_as(page, "U0ALICE")
        await say(page, "deploy api 2.4")
        thread = page.locator("#thread")
        card = thread.locator(".msg", has_text="Approval request")
        await expect(card).to_contain_text("example")
        await act_as(page, "U0BOB")
        await card.get_by_role("button", name="Approve", exact=True).click()
        await expect(thread).to_contain_text("deployed api 2.4 (was 2.3)")
        assert _calls(log, "deploy") == [{"service": "api", "version": "2.4"}]

        await act_as(page, "U0ALICE")
        await say(page, "incident on web")
        question = thread.locator(".msg", has_text="How severe is the incident on web?")
        await question.get_by_role("button", name="sev2", exact=True).click()
        await expect(thread).to_contain_text("opened a sev2 incident for web")
        await page.screenshot(path=str(tmp_path / "example.png"))
    assert _calls(log, "incident")[-1]["answer"] == {
        "action": "accept",
        "content": {"severity": "sev2"},
    }
