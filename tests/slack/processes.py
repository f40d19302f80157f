"""Real `handback run` processes for the Slack tests: free ports, their log, and a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self

import aiohttp

# The key prefix a store URL without one gets: the raw audit read looks for the processes' writes.
from state._keys import DEFAULT_PREFIX

from .._local_slack import ApiCall, ChangeKind, TestSlack
from ..conftest import _redis_audit_leaks, _sqlite_audit_leaks

ROOT = Path(__file__).resolve().parents[2]
HANDBACK = Path(sys.executable).parent / "handback"
START_TIMEOUT = 90.0
"""Seconds a `handback run` may take to serve. Start-up is imports and a store connection, not
a property under test: on a machine this busy (two cores shared by several test runs) it took
more than 20 s, so the bound only says "it started"."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bot_env(slack: TestSlack, store_url: str, port: int) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return {
        **keep,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_API_URL": slack.api_url,
        "HANDBACK_STORE": store_url,
        "HANDBACK_LOG_LEVEL": "INFO",
        # Gates are shut without a rule; tests about something else open them explicitly.
        "HANDBACK_APPROVERS": "anyone",
        # A SIGKILLed bot leaves its threads leased; the next one waits this long, not a minute.
        "HANDBACK_LIVENESS_TTL": "2s",
        "HOST": "127.0.0.1",
        "PORT": str(port),
    }


class BotProcess:
    """One `handback run` in HTTP mode; its standard error is read line by line into `lines`."""

    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.lines: list[str] = []
        self.role: Role = "all"
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

    @property
    def pid(self) -> int:
        return int(self.process.pid)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def kill(self) -> int:
        """SIGKILL: no clean-up of any kind, as when the machine or the OOM killer takes it."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGKILL)
        code = await self.process.wait()
        await self._reader
        return code

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


def audit_leaks(store_url: str) -> list[str]:
    """The entries of the store's audit log that hold one of `TEST_SECRETS` (read raw)."""
    if store_url.startswith("sqlite"):
        return _sqlite_audit_leaks(Path(store_url.removeprefix("sqlite:///").split("?", 1)[0]))
    if "prefix=" not in store_url:
        # The store's own default prefix, as `RedisStore.from_url` reads it.
        store_url += f"{'&' if '?' in store_url else '?'}prefix={DEFAULT_PREFIX}"
    return _redis_audit_leaks(store_url)


def check_audit(store_url: str) -> None:
    """Fail when the processes' store keeps a typed secret in its audit: checked when the
    processes are gone, whether the store came from a scanned fixture or not."""
    leaks = audit_leaks(store_url)
    if leaks:
        raise AssertionError(f"the audit log holds typed secrets: {leaks}")


@asynccontextmanager
async def bot_processes(
    slack: TestSlack,
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
    check_audit(store_url)


# ------------------------------------------------------------------ durable execution (issue 8)

Role = Literal["all", "web", "worker"]

_READY: dict[Role, str] = {
    "all": "listening on",
    "web": "listening on",
    "worker": "working the inbox",
}
"""What each role logs once it serves."""


async def spawn_bot(
    slack: TestSlack,
    store_url: str,
    *,
    ref: str,
    role: Role = "all",
    env: Mapping[str, str] | None = None,
) -> BotProcess:
    """Start one `handback run REF --role ROLE` (not waiting for it to listen); `env` is added to
    `bot_env` (a value of "" removes the variable)."""
    port = free_port()
    environment = {**bot_env(slack, store_url, port), **(env or {})}
    process = await asyncio.create_subprocess_exec(
        str(HANDBACK),
        "run",
        ref,
        "--role",
        role,
        cwd=ROOT,
        env={k: v for k, v in environment.items() if v != ""},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    bot = BotProcess(process, port)
    bot.role = role
    return bot


class Fleet:
    """Bot processes on one store, started (and killed) one by one as a test goes; every one
    still running is SIGKILLed on exit, whatever happened."""

    def __init__(
        self,
        slack: TestSlack,
        store_url: str,
        *,
        ref: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.slack = slack
        self.store_url = store_url
        self.ref = ref
        self.env = dict(env or {})
        self.bots: list[BotProcess] = []

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.gather(*(bot.kill() for bot in self.bots), return_exceptions=True)
        if exc is not None:
            print(self.logs())  # shown by pytest with the failure
            return
        check_audit(self.store_url)

    async def start(self, *roles: Role, env: Mapping[str, str] | None = None) -> list[BotProcess]:
        """Start one process per role at once, wait until each serves, and route LocalSlack's
        deliveries to every live process with a Slack endpoint."""
        started = []
        for role in roles:
            bot = await spawn_bot(
                self.slack, self.store_url, ref=self.ref, role=role, env={**self.env, **(env or {})}
            )
            self.bots.append(bot)
            started.append(bot)
        await asyncio.gather(
            *(bot.wait_for_log(_READY[bot.role], timeout=START_TIMEOUT) for bot in started)
        )
        self.route()
        return started

    def route(self) -> None:
        """Deliveries go to the live processes that serve Slack, in turn."""
        self.slack.bot_urls = [bot.url for bot in self.live if bot.role != "worker"]

    @property
    def live(self) -> list[BotProcess]:
        return [bot for bot in self.bots if bot.alive]

    async def kill(self, bot: BotProcess) -> None:
        assert await bot.kill() == -signal.SIGKILL
        self.route()

    async def first_to_exit(self, *, timeout: float = 20.0) -> BotProcess:  # noqa: ASYNC109
        """The first process (of those alive now) to exit, once it has; deliveries are
        re-routed to the others."""
        candidates = self.live
        waits = {asyncio.ensure_future(bot.process.wait()): bot for bot in candidates}
        try:
            done, _ = await asyncio.wait(
                waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for wait in waits:
                wait.cancel()
        if not done:
            logs = "".join(line for bot in candidates for line in bot.lines[-20:])
            raise AssertionError(f"no bot process exited within {timeout}s:\n{logs}")
        exited = waits[done.pop()]
        await exited.kill()  # reaps it and its log reader
        self.route()
        return exited

    def by_pid(self, pid: int) -> BotProcess:
        return next(bot for bot in self.bots if bot.pid == pid)

    def logs(self) -> str:
        return "".join(f"[{bot.pid} {bot.role}] {line}" for bot in self.bots for line in bot.lines)


ApiHook = Callable[[ApiCall], None]


class HookedSlack(TestSlack):
    """A LocalSlack that runs hooks the moment a Web API call arrives, before it is answered
    (and before it changes the workspace): a hook that kills the bot process makes the bot die
    with the call sent and its answer never read."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.hooks: list[ApiHook] = []

    async def publish(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        if kind == "call" and self.calls:
            call = self.calls[-1]  # appended just before this change is published
            for hook in list(self.hooks):
                hook(call)
        await super().publish(kind, data)
