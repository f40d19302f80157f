"""The real `handback run` process: killed with SIGKILL after posting a card, restarted, clicked;
SIGTERM finishes a resume in flight and stops a Socket Mode bot that cannot connect; a token
Slack refuses stops start-up with one line."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket

import pytest

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.testing import FunctionModel

from .._local_slack import TestSlack
from .conftest import ALICE, BOB, CHANNEL, assert_no_leaks
from .processes import HANDBACK, ROOT, bot_processes, free_port

pytestmark = pytest.mark.slow


async def test_card_posted_before_sigkill_resumes_after_restart(store_url: str) -> None:
    async with TestSlack() as slack:
        async with bot_processes(slack, store_url) as [first]:
            asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
            card = await slack.wait_for(lambda: next(iter(slack.bot_messages()), None))
            assert card is not None
            assert card.blocks and card.thread_ts == asked.ts
            first.process.send_signal(signal.SIGKILL)
            assert await first.process.wait() == -signal.SIGKILL

        async with bot_processes(slack, store_url):
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            answer = await slack.wait_for(
                lambda: [m for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks],
                timeout=20,
            )
            assert answer[0].text == "Tool said: deployed api to prod"
            updated = slack.message(card.channel, card.ts)
            assert updated is not None and f"<@{BOB}>" in str(updated.blocks)


async def test_sigterm_stops_cleanly(sqlite_store_url: str) -> None:
    async with TestSlack() as slack, bot_processes(slack, sqlite_store_url) as [bot]:
        assert await bot.stop() == 0


async def _slow_deploy(service: str, environment: str) -> str:
    """Deploy a service, slowly."""
    logging.getLogger("handback.slack").warning("deploying %s now", service)
    await asyncio.sleep(1.0)
    return f"deployed {service} to {environment}"


slow_approval_agent = Agent(
    name="slow-approver",
    model=FunctionModel(
        lambda m: (
            f"Tool said: {m[-1]['content']}"
            if m[-1]["role"] == "tool"
            else [{"name": "_slow_deploy", "arguments": {"service": "api", "environment": "prod"}}]
        )
    ),
    tools=[Tool(_slow_deploy, requires_approval=True)],
)
"""Served by a real `handback run` in the SIGTERM test."""


@pytest.mark.slow
async def test_sigterm_while_a_resume_is_in_flight_finishes_it(sqlite_store_url: str) -> None:
    async with (
        TestSlack() as slack,
        bot_processes(
            slack, sqlite_store_url, ref="tests.slack.test_slack_process:slow_approval_agent"
        ) as [bot],
    ):
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy")
        [card] = await slack.wait_for(lambda: slack.bot_messages())
        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        await bot.wait_for_log("deploying api now")
        bot.process.send_signal(signal.SIGTERM)
        assert await bot.stop() == 0
        texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
        assert texts == ["Tool said: deployed api to prod"]
        assert_no_leaks(slack)


async def _handback_run(env: dict[str, str]) -> asyncio.subprocess.Process:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return await asyncio.create_subprocess_exec(
        str(HANDBACK),
        "run",
        "tests.slack.agents:approval_agent",
        cwd=ROOT,
        env={**keep, "HANDBACK_LOG_LEVEL": "INFO", **env},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["http", "socket"])
async def test_a_token_slack_refuses_stops_start_up_with_one_line(
    sqlite_store_url: str, mode: str
) -> None:
    async with TestSlack() as slack:
        env = {
            "SLACK_BOT_TOKEN": "xoxb-wrong" if mode == "http" else slack.bot_token,
            "SLACK_API_URL": slack.api_url,
            "HANDBACK_STORE": sqlite_store_url,
            "HANDBACK_APPROVERS": "anyone",
            "HOST": "127.0.0.1",
            "PORT": str(free_port()),
        }
        if mode == "http":
            env["SLACK_SIGNING_SECRET"] = slack.signing_secret
        else:
            env["SLACK_APP_TOKEN"] = "xapp-wrong"
        process = await _handback_run(env)
        async with asyncio.timeout(30):
            _, stderr = await process.communicate()
    name = "SLACK_BOT_TOKEN" if mode == "http" else "SLACK_APP_TOKEN"
    assert process.returncode == 2
    assert (
        stderr.decode().splitlines()[-1] == f"handback: {name} was refused by Slack (invalid_auth)"
    )
    assert "Traceback" not in stderr.decode()


@pytest.mark.slow
async def test_sigterm_while_socket_mode_cannot_connect(sqlite_store_url: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/api/"
    process = await _handback_run(
        {
            "SLACK_BOT_TOKEN": "xoxb-x",
            "SLACK_APP_TOKEN": "xapp-x",
            "SLACK_API_URL": dead,
            "HANDBACK_STORE": sqlite_store_url,
            "HANDBACK_APPROVERS": "anyone",
        }
    )
    assert process.stderr is not None
    async with asyncio.timeout(30):
        while b"connecting over Socket Mode" not in (line := await process.stderr.readline()):
            assert line, "the bot exited before connecting"
    process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(10):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
