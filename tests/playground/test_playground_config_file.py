"""`handback dev handback.toml`: the playground runs the agent a config file declares, its MCP
servers started, each channel offered its own tools; driven over the page's web API only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bot.testing import OpenAICompatServer

from ..mcp.config_files import GENERAL, TIX_TOOLS, offered, server_env, two_servers
from .conftest import PageClient, bot_replies
from .dev_process import offline_env, read_url, start_dev, stop_dev

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
        env = offline_env(**server_env(tmp_path)) | {
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": model.base_url,
        }
        process = await start_dev(str(path), cwd=tmp_path, env=env)
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
            await stop_dev(process, seconds=30)
    expected = sorted(TIX_TOOLS | {"ops_status"})
    assert reply["thread_ts"] == sent["ts"]
    assert reply["text"] == "my tools here: " + ", ".join(expected)
    assert [sorted(offered(r)) for r in requests] == [expected]
    assert process.returncode == 0
