"""`handback run` with an MCP server: the process opens it at start and closes it on SIGTERM;
a bot killed (SIGKILL) while an MCP call is open reports it interrupted after the restart and
never sends it again; a gated call approved after a restart reaches the server once."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocks import ACTION_APPROVE
from bot.playground._slack import LocalSlack

from ..mcp.conftest import Ops, ops_in, until
from .conftest import ALICE, BOB, CHANNEL
from .durable import answer_in, card_in
from .processes import Fleet

pytestmark = pytest.mark.slow

AGENT = "tests.slack.mcp_agent:agent"


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


def _env(ops: Ops) -> dict[str, str]:
    return {"OPS_LOG": str(ops.log), "OPS_PID": str(ops.pid)}


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie nobody reaped yet (the bot, its parent, is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def test_a_call_open_when_the_bot_died_is_interrupted_and_an_approval_survives(
    sqlite_store_url: str, ops: Ops
) -> None:
    async with (
        LocalSlack() as slack,
        Fleet(slack, sqlite_store_url, ref=AGENT, env=_env(ops)) as fleet,
    ):
        [first] = await fleet.start("all")
        assert any("MCP server ops connected" in line for line in first.lines)
        deploy = await slack.post_user_message(ALICE, CHANNEL, "deploy api 2.4")
        card = await card_in(slack, deploy.ts)
        hang = await slack.post_user_message(ALICE, CHANNEL, "hang")
        await until(lambda: ops.calls("hang"))
        await fleet.kill(first)

        [second] = await fleet.start("all")
        [said] = await answer_in(slack, hang.ts, timeout=40)
        assert said.startswith("Tool said: Interrupted: the process stopped while this ran")
        assert len(ops.calls("hang")) == 1  # never sent again
        assert ops.calls("deploy") == []

        assert (await slack.click(BOB, card.ts, ACTION_APPROVE)).status == 200
        assert await answer_in(slack, deploy.ts) == ["Tool said: deployed api 2.4"]
        assert len(ops.calls("deploy")) == 1

        server_pid = int(ops.pid.read_text())
        assert await second.stop() == 0
        assert _gone(server_pid)  # closed by the bot within its shutdown grace
