"""`handback run` with an MCP server: the process opens it at start and closes it on SIGTERM;
a bot killed (SIGKILL) while an MCP call is open reports it interrupted after the restart and
never sends it again; a gated call approved after a restart reaches the server once; a server's
question answered after a restart sends one retry, with the state stored with the call."""

from __future__ import annotations

from pathlib import Path

import pytest

from blocks import ACTION_ANSWER, ACTION_APPROVE

from .._local_slack import TestSlack
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
        TestSlack() as slack,
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


async def test_a_question_answered_after_a_kill_sends_one_retry_with_the_stored_state(
    store_url: str, ops: Ops
) -> None:
    async with TestSlack() as slack, Fleet(slack, store_url, ref=AGENT, env=_env(ops)) as fleet:
        [first] = await fleet.start("all")
        scale = await slack.post_user_message(ALICE, CHANNEL, "scale api")
        card = await card_in(slack, scale.ts)
        [asked] = ops.calls("scale")
        assert asked["arguments"]["state"] is None
        await fleet.kill(first)

        [second] = await fleet.start("all")
        assert (await slack.click(ALICE, card.ts, ACTION_ANSWER, value="form")).status == 200
        await until(lambda: slack.views)
        [view] = list(slack.views.values())
        inputs = {
            b["label"]["text"]: b["block_id"] for b in view.view["blocks"] if b["type"] == "input"
        }
        submitted = await slack.submit_view(
            ALICE, view.id, {inputs["Replicas"]: "4", inputs["Reason"]: "after a crash"}
        )
        assert submitted.status == 200
        assert await answer_in(slack, scale.ts) == ["Tool said: scaled api to 4"]
        [_, retry] = ops.calls("scale")  # exactly one retry, from the stored round
        assert retry["arguments"]["state"].startswith("r1:")
        assert retry["arguments"]["responses"] == {
            "replicas": {"action": "accept", "content": {"replicas": 4, "reason": "after a crash"}}
        }
        assert await second.stop() == 0
