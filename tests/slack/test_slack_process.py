"""The real `handback run` process: killed with SIGKILL after posting a card, restarted, clicked."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot.playground._slack import LocalSlack

from .conftest import ALICE, BOB, CHANNEL

ROOT = Path(__file__).resolve().parents[2]
HANDBACK = Path(sys.executable).parent / "handback"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _env(slack: LocalSlack, store_url: str, port: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return {
        **keep,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_API_URL": slack.api_url,
        "HANDBACK_STORE": store_url,
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }


@asynccontextmanager
async def _bot_process(
    slack: LocalSlack, store_url: str, ref: str = "tests.slack.agents:approval_agent"
) -> AsyncIterator[asyncio.subprocess.Process]:
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        str(HANDBACK),
        "run",
        ref,
        cwd=ROOT,
        env=_env(slack, store_url, port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(20):
            while True:
                line = (await process.stderr.readline()).decode()
                if not line:
                    raise AssertionError("the bot exited early:\n" + "".join(seen))
                seen.append(line)
                if "listening on" in line:
                    break
        slack.bot_url = f"http://127.0.0.1:{port}/slack/events"
        drainer = asyncio.create_task(_drain(process.stderr))
        yield process
        drainer.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def test_card_posted_before_sigkill_resumes_after_restart(store_url: str) -> None:
    async with LocalSlack() as slack:
        async with _bot_process(slack, store_url) as first:
            asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
            card = await slack.wait_for(lambda: next(iter(slack.bot_messages()), None))
            assert card.blocks and card.thread_ts == asked.ts
            first.send_signal(signal.SIGKILL)
            assert await first.wait() == -signal.SIGKILL

        async with _bot_process(slack, store_url):
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            answer = await slack.wait_for(
                lambda: [m for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks],
                timeout=20,
            )
            assert answer[0].text == "Tool said: deployed api to prod"
            updated = slack.message(card.channel, card.ts)
            assert updated is not None and f"<@{BOB}>" in str(updated.blocks)


async def test_sigterm_stops_cleanly(sqlite_store_url: str) -> None:
    async with LocalSlack() as slack, _bot_process(slack, sqlite_store_url) as process:
        process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await process.wait() == 0
