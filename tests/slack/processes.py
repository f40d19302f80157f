"""Real `handback run` processes for the Slack tests: free ports, their log, and a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from bot.playground._slack import LocalSlack

ROOT = Path(__file__).resolve().parents[2]
HANDBACK = Path(sys.executable).parent / "handback"
START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bot_env(slack: LocalSlack, store_url: str, port: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return {
        **keep,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_API_URL": slack.api_url,
        "HANDBACK_STORE": store_url,
        "HANDBACK_LOG_LEVEL": "INFO",
        # A SIGKILLed bot leaves its threads leased; the next one waits this long, not a minute.
        "HANDBACK_THREAD_LEASE_TTL": "2s",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }


class BotProcess:
    """One `handback run` in HTTP mode; its standard error is read line by line into `lines`."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.lines: list[str] = []
        self._ended = False
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @property
    def url(self) -> str:
        """The `/slack/events` endpoint."""
        return f"http://127.0.0.1:{self.port}/slack/events"

    async def _read(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        while line := (await stream.readline()).decode():
            self.lines.append(line)
            async with self._changed:
                self._changed.notify_all()
        self._ended = True
        async with self._changed:
            self._changed.notify_all()

    async def wait_for_log(self, text: str, *, timeout: float = 10.0) -> str:  # noqa: ASYNC109
        """The first log line containing `text`, once it is written."""
        async with asyncio.timeout(timeout), self._changed:
            while True:
                for line in self.lines:
                    if text in line:
                        return line
                if self._ended:
                    raise AssertionError(
                        f"the bot exited without logging {text!r}:\n" + "".join(self.lines)
                    )
                await self._changed.wait()

    async def wait_idle(self, *, timeout: float = 10.0) -> None:  # noqa: ASYNC109
        """Until `/healthz` reports no work in flight: everything requests started has ended.

        The bot has no way to announce this, so it is asked every 20 ms until it says so.
        """
        health = f"http://127.0.0.1:{self.port}/healthz"
        async with asyncio.timeout(timeout), aiohttp.ClientSession() as session:
            while True:
                async with session.get(health) as response:
                    if (await response.json())["busy"] == 0:
                        return
                await asyncio.sleep(0.02)

    async def stop(self) -> int:
        """SIGTERM (the bot finishes its work and exits), SIGKILL if it has not after 10 s."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
            try:
                async with asyncio.timeout(10):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
        code = await self.process.wait()
        await self._reader
        return code


@asynccontextmanager
async def bot_processes(
    slack: LocalSlack,
    store_url: str,
    *,
    count: int = 1,
    ref: str = "tests.slack.agents:approval_agent",
) -> AsyncIterator[list[BotProcess]]:
    """Start `count` bots on one store at once and wait until each listens; all stop on exit.

    LocalSlack's endpoints become these bots', in order.
    """
    bots: list[BotProcess] = []
    try:
        for _ in range(count):
            port = free_port()
            process = await asyncio.create_subprocess_exec(
                str(HANDBACK),
                "run",
                ref,
                cwd=ROOT,
                env=bot_env(slack, store_url, port),
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
            )
            bots.append(BotProcess(process, port))
        for bot in bots:
            await bot.wait_for_log("listening on", timeout=START_TIMEOUT)
        slack.bot_urls = [bot.url for bot in bots]
        yield bots
    finally:
        await asyncio.gather(*(bot.stop() for bot in bots), return_exceptions=True)
