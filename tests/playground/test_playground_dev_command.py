"""`handback dev` as a person starts it: a subprocess on a free port, driven over HTTP only."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from .conftest import PageClient, bot_replies, element

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command() -> list[str]:
    script = Path(sys.executable).with_name("handback")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "bot._cli"]


async def read_url(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(30):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise AssertionError("handback dev exited before printing its URL")
            found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            if found:
                return found.group(1)


async def test_handback_dev_serves_one_approval_flow(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLACK_"))}
    env.pop("HANDBACK_STORE", None)
    process = await asyncio.create_subprocess_exec(
        *command(),
        "dev",
        "--no-browser",
        "--port",
        str(port),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = await read_url(process)
        assert url == f"http://127.0.0.1:{port}/"
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as response:
                assert response.status == 200
                assert "handback playground" in await response.text()
            page = PageClient(session, url)
            first = await page.state("U0ALICE")
            assert first["model"] == {"label": "offline demo model", "offline": True}

            status, sent = await page.post(
                "/api/messages",
                {"user": "U0ALICE", "channel": "C0DEPLOYS", "text": "deploy api 2.3 to staging"},
            )
            assert status == 200, sent
            card = await page.wait_for(
                "U0BOB", lambda s: next(iter(bot_replies(s, "hb:approve")), None)
            )
            assert card["thread_ts"] == sent["ts"]
            approve = element(card, "hb:approve")
            assert approve is not None and approve["style"] == "primary"

            status, clicked = await page.post(
                "/api/actions",
                {
                    "user": "U0BOB",
                    "channel": "C0DEPLOYS",
                    "message_ts": card["ts"],
                    "action": {"action_id": "hb:approve", "type": "button", "value": "approve"},
                },
            )
            assert (status, clicked["ok"]) == (200, True)
            answer = await page.wait_for(
                "U0ALICE", lambda s: next(iter(bot_replies(s, "Deployed api 2.3 to staging")), None)
            )
            assert answer["thread_ts"] == sent["ts"]
            after = await page.state("U0ALICE")
            updated = next(m for m in after["messages"] if m["ts"] == card["ts"])
            assert "Approved* by <@U0BOB>" in str(updated["blocks"])
            assert element(updated, "hb:approve") is None
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        async with asyncio.timeout(20):
            out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    assert "stopped" in out.decode()
    assert "Traceback" not in err.decode()
    # The store lived in a temporary folder: nothing is left in the working directory.
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - the process has exited


async def test_handback_dev_names_a_bad_agent_in_one_line(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        *command(),
        "dev",
        "--no-browser",
        "--port",
        str(free_port()),
        "--agent",
        "no_such_module:agent",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        _, err = await process.communicate()
    assert process.returncode == 2
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1 and "no_such_module" in lines[0], lines


async def test_handback_dev_reports_a_busy_port(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = await asyncio.create_subprocess_exec(
            *command(),
            "dev",
            "--no-browser",
            "--port",
            str(port),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(30):
            _, err = await process.communicate()
    assert process.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err.decode()
    assert "Traceback" not in err.decode()
