"""`handback run handback.toml` as deployed: a real process serves the file's agent, starts its
MCP servers, offers each channel its own tools, and runs a gated call once after approval."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot.testing import OpenAICompatServer

from .._local_slack import TestSlack
from ..mcp.config_files import (
    DEPLOYS,
    GENERAL,
    OPS_TOOLS,
    TIX_TOOLS,
    Script,
    calls,
    offered,
    server_env,
    two_servers,
)
from .conftest import ALICE, BOB
from .durable import answer_in, card_in
from .processes import Fleet

pytestmark = pytest.mark.slow


async def test_handback_run_serves_a_config_file_with_its_channels_tool_sets(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    path = two_servers(tmp_path)
    async with OpenAICompatServer(Script()) as model:
        env = server_env(tmp_path) | {
            "OPENAI_API_KEY": "test-key",
            "OPENAI_BASE_URL": model.base_url,
        }
        async with (
            TestSlack() as slack,
            Fleet(slack, sqlite_store_url, ref=str(path), env=env) as fleet,
        ):
            [bot] = await fleet.start("all")
            deploy = await slack.post_user_message(ALICE, DEPLOYS, "call ops_deploy")
            card = await card_in(slack, deploy.ts, timeout=40)
            assert offered(model.requests[-1]) == OPS_TOOLS
            assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
            assert await answer_in(slack, deploy.ts, timeout=40) == ["Tool said: deployed api 2.4"]

            elsewhere = await slack.post_user_message(ALICE, GENERAL, "call ops_deploy")
            [said] = await answer_in(slack, elsewhere.ts, timeout=40)
            assert said.startswith("Tool said: Error: there is no tool `ops_deploy`")
            assert offered(model.requests[-1]) == TIX_TOOLS | {"ops_status"}
            assert await bot.stop() == 0
    assert len(calls(tmp_path / "a.log", "deploy")) == 1
