"""`handback dev handback.toml`: the playground runs the agent a config file declares, its MCP
servers started, each channel offered its own tools; driven over the page's web API only."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.testing import OpenAICompatServer

from ..mcp.config_files import GENERAL, TIX_TOOLS, offered, server_env, two_servers
from .conftest import PageClient, bot_replies
from .test_playground_dev_command import command, free_port, read_url

pytestmark = pytest.mark.slow


async def test_handback_dev_runs_a_config_file_with_the_channels_tool_list(
    tmp_path: Path,
) -> None:
    requests: list[dict[str, Any]] = []

    def say_the_tools(messages: list[dict[str, Any]]) -> str:
        # The server keeps each request before asking the script: the last one is this one.
        requests.append(model.requests[-1])
        return "my tools here: " + ", ".join(sorted(offered(model.requests[-1])))

    model = OpenAICompatServer(say_the_tools)
    async with model:
        path = two_servers(tmp_path)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLACK_"))}
        env.pop("HANDBACK_STORE", None)
        env |= server_env(tmp_path) | {
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": model.base_url,
        }
        process = await asyncio.create_subprocess_exec(
            *command(),
            "dev",
            str(path),
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
            async with aiohttp.ClientSession() as session:
                page = PageClient(session, url)
                first = await page.state("U0ALICE")
                assert first["model"]["offline"] is False
                status, sent = await page.post(
                    "/api/messages",
                    {"user": "U0ALICE", "channel": GENERAL, "text": "what can you do?"},
                )
                assert status == 200, sent
                reply = await page.wait_for(
                    "U0ALICE", lambda s: next(iter(bot_replies(s, "my tools here:")), None)
                )
        finally:
            process.send_signal(2)  # Ctrl+C: the playground closes its MCP servers
            async with asyncio.timeout(30):
                await process.wait()
    expected = sorted(TIX_TOOLS | {"ops_status"})
    assert reply["thread_ts"] == sent["ts"]
    assert reply["text"] == "my tools here: " + ", ".join(expected)
    assert [sorted(offered(r)) for r in requests] == [expected]
    assert process.returncode == 0
