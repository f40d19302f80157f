"""Fixtures for the playground: a running playground and headless Chromium (never downloaded)."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from bot import chatops
from bot.playground import Playground

from ..conftest import IN_CI

CHROMIUM = Path(os.environ.get("HANDBACK_TEST_CHROMIUM", "/usr/bin/chromium"))
WAIT_SECONDS = 15.0
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium; in CI a missing one fails the test instead of skipping it."""
    if not CHROMIUM.exists():
        if IN_CI:
            pytest.fail(f"Chromium is not installed at {CHROMIUM} and CI is set")
        pytest.skip(f"Chromium is not installed at {CHROMIUM}")
    return CHROMIUM


@pytest.fixture
async def playground(
    monkeypatch: pytest.MonkeyPatch, sqlite_store_url: str
) -> AsyncIterator[Playground]:
    """The chat-ops example on the offline demo model, with a fresh pretend fleet; its store
    is the `sqlite_store_url` fixture's, so its audit is scanned for `TEST_SECRETS`."""
    monkeypatch.setattr(chatops, "fleet", chatops.Fleet.fresh())
    async with Playground(chatops.agent, environ={}, store_url=sqlite_store_url) as running:
        yield running


@pytest.fixture(scope="session")
def chromium_endpoint(chromium: Path) -> Iterator[str]:
    """One headless Chromium for the whole session (per xdist worker), on a DevTools port of
    its own: starting a browser costs seconds, and each test still gets a fresh context (its
    own cookies, storage and pages) in `browser_page`, closed after it."""
    profile = tempfile.mkdtemp(prefix="handback-test-chromium-")
    process = subprocess.Popen(
        [
            str(chromium),
            *CHROMIUM_ARGS,
            "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        yield _devtools_endpoint(process)
    finally:
        process.kill()
        process.wait()
        assert process.stderr is not None
        process.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_endpoint(process: subprocess.Popen[bytes]) -> str:
    """The `ws://` address Chromium prints once its DevTools port listens; a thread reads its
    stderr so a browser that never gets there fails after `WAIT_SECONDS` instead of hanging."""
    assert process.stderr is not None
    stderr = process.stderr
    found: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        for raw in iter(stderr.readline, b""):
            line = raw.decode(errors="replace").strip()
            seen.append(line)
            if line.startswith("DevTools listening on "):
                found.put(line.removeprefix("DevTools listening on "))
        found.put("")

    threading.Thread(target=read, daemon=True).start()
    try:
        endpoint = found.get(timeout=WAIT_SECONDS)
    except queue.Empty:
        endpoint = ""
    if not endpoint:
        raise RuntimeError("Chromium did not open its DevTools port:\n" + "\n".join(seen))
    return endpoint


@pytest.fixture
async def browser_page(chromium_endpoint: str) -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(chromium_endpoint)
        try:
            context = await browser.new_context(
                viewport={"width": 1400, "height": 900}, timezone_id="UTC"
            )
            page = await context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
            assert errors == [], f"the page raised: {errors}"
        finally:
            # Closes every context this connection made (the test's own included) and
            # disconnects; the shared browser goes on.
            await browser.close()


class PageClient:
    """Talks to the page's JSON API and live feed the way the page's script does."""

    def __init__(self, session: Any, base_url: str) -> None:
        self.session = session
        self.base = base_url.rstrip("/")

    async def state(self, user: str) -> dict[str, Any]:
        async with self.session.get(f"{self.base}/api/state", params={"user": user}) as response:
            assert response.status == 200
            return dict(await response.json())

    async def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        async with self.session.post(f"{self.base}{path}", json=body) as response:
            return response.status, dict(await response.json())

    async def wait_for(self, user: str, predicate: Any) -> Any:
        """Re-read the state on every live change until `predicate(state)` is truthy."""
        import asyncio

        async with asyncio.timeout(WAIT_SECONDS):
            async with self.session.get(f"{self.base}/api/events") as events:
                assert events.headers["Content-Type"].startswith("text/event-stream")
                while True:
                    found = predicate(await self.state(user))
                    if found:
                        return found
                    # Block until the next change (or heartbeat) arrives on the stream.
                    while True:
                        line = await events.content.readline()
                        if not line:
                            raise AssertionError("the live feed closed")
                        if line.startswith(b"event: change"):
                            break


def bot_replies(state: dict[str, Any], text: str) -> list[dict[str, Any]]:
    """Messages the bot posted (not ephemerals) whose text or blocks mention `text`."""
    import json

    return [
        m
        for m in state["messages"]
        if m["user"] == state["bot_user_id"]
        and not m.get("ephemeral_to")
        and (text in m["text"] or text in json.dumps(m["blocks"]))
    ]


def element(message: dict[str, Any], action_id: str) -> dict[str, Any] | None:
    for block in message["blocks"]:
        for item in [*block.get("elements", []), block.get("accessory") or {}]:
            if item.get("action_id") == action_id:
                return dict(item)
    return None


def card_with(state: dict[str, Any], action_id: str, text: str = "") -> dict[str, Any] | None:
    """The bot's message mentioning `text` that carries the control `action_id`."""
    for message in bot_replies(state, text):
        if element(message, action_id) is not None:
            return message
    return None


async def open_page(page: Any, url: str) -> None:
    """Open the page at `url` and wait until its live feed is connected."""
    expect.set_options(timeout=WAIT_SECONDS * 1000)
    await page.goto(url)
    await expect(page.locator("#conn.live")).to_be_visible()


async def say(page: Any, text: str) -> None:
    """Send `text` from the composer and wait until it starts a thread."""
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")
    await expect(page.locator("#thread .thread-parent")).to_contain_text(text)
