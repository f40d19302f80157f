"""`handback dev` as a person starts it: a subprocess on a free port, driven over HTTP only."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import aiohttp
import pytest

from .conftest import PageClient, bot_replies, element
from .dev_process import free_port, offline_env, read_url, start_dev, stop_dev

pytestmark = pytest.mark.slow


async def test_handback_dev_serves_one_approval_flow(tmp_path: Path) -> None:
    port = free_port()
    process = await start_dev(cwd=tmp_path, port=port, env=offline_env())
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
        out, err = await stop_dev(process, seconds=20)
    assert process.returncode == 0, err
    assert "stopped" in out
    assert "Traceback" not in err
    # The store lived in a temporary folder: nothing is left in the working directory.
    assert not any(tmp_path.iterdir())  # noqa: ASYNC240 - the process has exited


async def test_handback_dev_names_a_bad_agent_in_one_line(tmp_path: Path) -> None:
    process = await start_dev("--agent", "no_such_module:agent", cwd=tmp_path)
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
        process = await start_dev(cwd=tmp_path, port=port)
        async with asyncio.timeout(30):
            _, err = await process.communicate()
    assert process.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err.decode()
    assert "Traceback" not in err.decode()
