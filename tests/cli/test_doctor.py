"""`handback doctor` against LocalSlack and a real Redis: a line per check, exit 1 on failure."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from bot.testing import OpenAICompatServer

from .._local_slack import TestSlack

ROOT = Path(__file__).resolve().parents[2]
AGENT = "tests.slack.agents:approval_agent"

pytestmark = pytest.mark.slow


async def doctor(
    slack: TestSlack, store_url: str, *, agent: str = AGENT, **env: str
) -> tuple[int, list[str]]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    environment = {
        **keep,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_SIGNING_SECRET": slack.signing_secret,
        "SLACK_API_URL": slack.api_url,
        "HANDBACK_STORE": store_url,
        # A gate nobody can open is a failure of its own (tested below); open it otherwise.
        "HANDBACK_APPROVERS": "anyone",
        **env,
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot._cli",
        "doctor",
        agent,
        cwd=ROOT,
        env={k: v for k, v in environment.items() if v != ""},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert b"Traceback" not in err, err.decode()
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines()


def line(lines: list[str], name: str) -> str:
    found = [entry for entry in lines if entry[6:].startswith(name + ":")]
    assert len(found) == 1, lines
    return found[0]


async def test_everything_right_exits_0(redis_store_url: str) -> None:
    async with TestSlack() as slack:
        code, lines = await doctor(
            slack,
            redis_store_url,
            HANDBACK_APPROVERS="U0BOB S0OPS",
            HANDBACK_TOOL_APPROVERS='{"deploy": ["U0DAVE"]}',
        )
    assert code == 0, lines
    assert line(lines, "mode").startswith("ok    mode: HTTP")
    store = line(lines, "store")
    assert store[6:].startswith("store: redis at redis://127.0.0.1")
    assert "reachable and writable; persistence: " in store
    # CI's Redis runs without persistence: that works, with a warning saying what it risks.
    assert store.startswith("ok") or "turn on AOF" in store
    assert "team local" in line(lines, "SLACK_BOT_TOKEN")
    assert line(lines, "scopes").startswith("ok")
    assert "user bob" in line(lines, "U0BOB (in HANDBACK_APPROVERS)")
    assert "user group with 2 member(s)" in line(lines, "S0OPS (in HANDBACK_APPROVERS)")
    assert "user dave" in line(lines, "U0DAVE (in HANDBACK_TOOL_APPROVERS[deploy])")
    who = line(lines, "approvals of `deploy`")
    assert "U0DAVE (from HANDBACK_TOOL_APPROVERS)" in who and "never the requester" in who
    assert line(lines, "cards").startswith("ok    cards: all 9 kinds fit Slack's limits")
    assert line(lines, "cards in Slack") == (
        "ok    cards in Slack: blocks.validate accepts all 9 kinds"
    )
    assert lines[-1] == "Everything checked is fine."


async def test_a_missing_scope_says_what_to_add_and_exits_1(redis_store_url: str) -> None:
    async with TestSlack() as slack:
        slack.scopes.remove("reactions:write")
        code, lines = await doctor(slack, redis_store_url)
    assert code == 1
    scopes = line(lines, "scopes")
    assert scopes.startswith("FAIL") and "missing reactions:write" in scopes
    assert "reinstall the app" in scopes
    assert lines[-1] == "1 check(s) failed."


async def test_failures_name_what_is_wrong(tmp_path: Path) -> None:
    async with TestSlack() as slack:
        code, lines = await doctor(
            slack,
            "redis://127.0.0.1:1/0",
            agent="bot.chatops:agent",
            SLACK_BOT_TOKEN="xoxb-revoked",
            OPENAI_API_KEY="",
        )
    assert code == 1
    assert line(lines, "model").startswith("FAIL  model: OPENAI_API_KEY is missing")
    assert line(lines, "store").startswith("FAIL  store: ")
    assert "invalid_auth" in line(lines, "SLACK_BOT_TOKEN")


async def test_an_approver_slack_does_not_know_fails(sqlite_store_url: str) -> None:
    async with TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            HANDBACK_APPROVERS="U0BOB",
            HANDBACK_ANSWERERS="U0NOBODY S0NONE",
        )
    assert code == 1
    assert line(lines, "U0BOB (in HANDBACK_APPROVERS)").startswith("ok")
    assert "user_not_found" in line(lines, "U0NOBODY (in HANDBACK_ANSWERERS)")
    assert line(lines, "S0NONE (in HANDBACK_ANSWERERS)").startswith("FAIL")


async def test_a_missing_sqlite_file_is_a_warning_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "later.db"
    async with TestSlack() as slack:
        code, lines = await doctor(slack, f"sqlite:///{path}")
    assert code == 0, lines
    assert line(lines, "store").startswith("warn  store: SQLite file")
    assert not path.exists()


async def test_a_gate_nobody_can_open_fails_and_anyone_is_named(sqlite_store_url: str) -> None:
    async with TestSlack() as slack:
        shut_code, shut = await doctor(slack, sqlite_store_url, HANDBACK_APPROVERS="")
        open_code, opened = await doctor(slack, sqlite_store_url)
        typo_code, typo = await doctor(slack, sqlite_store_url, HANDBACK_APPROVER="U0BOB")
        odd_code, odd = await doctor(
            slack, sqlite_store_url, HANDBACK_WHATEVER="1", HANDBACK_TOOL_APPROVERS='{"x": []}'
        )
    assert shut_code == 1
    assert line(shut, "approvals of `deploy`").startswith("FAIL  approvals of `deploy`: ")
    assert "nobody: no approver rule is set" in line(shut, "approvals of `deploy`")
    assert open_code == 0, opened
    assert "anyone in the channel but the requester (HANDBACK_APPROVERS=anyone)" in line(
        opened, "approvals of `deploy`"
    )
    assert typo_code == 1
    assert typo == [
        "FAIL  settings: HANDBACK_APPROVER is not a setting: did you mean HANDBACK_APPROVERS?"
    ]
    assert odd_code == 1
    assert line(odd, "HANDBACK_WHATEVER").startswith("FAIL")
    assert line(odd, "HANDBACK_TOOL_APPROVERS[x]").startswith("FAIL")


async def test_doctor_starts_each_mcp_server_and_lists_its_tools_and_rules(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    async with TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent="tests.slack.mcp_agent:agent",
            OPS_LOG=str(tmp_path / "ops.log"),
            OPS_PID=str(tmp_path / "ops.pid"),
        )
    assert code == 0, lines
    tools = line(lines, "tools of `ops`")
    assert tools.startswith("ok") and "ops_status" in tools and "ops_deploy" in tools
    assert "(gated: destructive)" in line(lines, "approvals of `ops_deploy`")
    assert "(gated: no annotations)" in line(lines, "approvals of `ops_restart`")
    assert not any("approvals of `ops_status`" in entry for entry in lines)  # read-only, trusted
    assert not any("approvals of `ops_hang`" in entry for entry in lines)  # approvals={hang: False}


async def test_a_token_without_users_read_is_told_apart_from_a_wrong_user_id(
    sqlite_store_url: str,
) -> None:
    async with TestSlack() as slack:
        slack.scopes.remove("users:read")
        code, lines = await doctor(slack, sqlite_store_url, HANDBACK_APPROVERS="U0BOB")
        assert code == 1
        bob = line(lines, "U0BOB (in HANDBACK_APPROVERS)")
        assert bob.startswith("FAIL") and "missing_scope: the token lacks users:read" in bob
        assert "wrong" not in bob
        assert "missing users:read" in line(lines, "scopes")

        slack.scopes.append("users:read")
        code, lines = await doctor(slack, sqlite_store_url, HANDBACK_APPROVERS="U0NOBODY")
    assert code == 1
    nobody = line(lines, "U0NOBODY (in HANDBACK_APPROVERS)")
    assert nobody.startswith("FAIL") and "user_not_found: the user id is wrong" in nobody
    assert line(lines, "scopes").startswith("ok")


async def test_doctor_on_a_config_file_prints_each_tools_rule_per_channel(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    from ..mcp.config_files import server_env, two_servers

    path = two_servers(tmp_path)
    # The file's model, served locally: doctor asks it one cheap question.
    model = OpenAICompatServer(lambda messages: "ok", models=["scripted"])
    async with model as server, TestSlack() as slack:
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=str(path),
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=server.base_url,
            **server_env(tmp_path),
        )
    assert code == 0, lines
    # Each server was started and listed its tools.
    assert "tix_deploy" in line(lines, "tools of `tix`")
    assert "ops_deploy" in line(lines, "tools of `ops`")
    # C0DEPLOYS: all of `ops`, with each tool's own rule; none of `tix`.
    assert line(lines, "in `C0DEPLOYS`, `ops_status`").endswith(": runs without approval")
    restart = line(lines, "in `C0DEPLOYS`, `ops_restart`")
    assert "(gated: no annotations); S0LEADS, U0BOB (from the tool's Approval)" in restart
    assert restart.endswith("; approvers reminded after 600s")
    assert "(gated: destructive)" in line(lines, "in `C0DEPLOYS`, `ops_deploy`")
    hidden = line(lines, "in `C0DEPLOYS`, not offered")
    assert "`tix_deploy`" in hidden and "ops_" not in hidden
    # C0GENERAL: `tix` (its default rule: two approvers) and only `ops_status` of `ops`.
    deploy = line(lines, "in `C0GENERAL`, `tix_deploy`")
    assert "by 2 distinct approvers (gated: server not trusted for annotations)" in deploy
    assert "U0BOB, U0CAROL" in deploy
    assert line(lines, "in `C0GENERAL`, `ops_status`").endswith(": runs without approval")
    assert not any(entry[6:].startswith("in `C0GENERAL`, `ops_deploy`") for entry in lines)
    assert "`ops_deploy`" in line(lines, "in `C0GENERAL`, not offered")


async def test_doctor_prints_a_channels_own_rule_and_the_default_elsewhere(
    sqlite_store_url: str, tmp_path: Path
) -> None:
    from ..mcp.config_files import channel_rules, server_env

    path = channel_rules(tmp_path)
    model = OpenAICompatServer(lambda messages: "ok", models=["scripted"])
    async with model as server, TestSlack() as slack:
        slack.add_usergroup("S0LEADS", ["U0CAROL", "U0DAVE"])
        code, lines = await doctor(
            slack,
            sqlite_store_url,
            agent=str(path),
            OPENAI_API_KEY="sk-test",
            OPENAI_BASE_URL=server.base_url,
            **server_env(tmp_path),
        )
    assert code == 0, lines
    prod = line(lines, "in `C0DEPLOYS`, `ops_deploy`")
    assert "by 2 distinct approvers" in prod and "S0LEADS (from the tool's Approval)" in prod
    assert "(this channel's rule)" in prod
    staging = line(lines, "in `C0GENERAL`, `ops_deploy`")
    assert "U0BOB (from the tool's Approval)" in staging and "distinct" not in staging
    assert "(this channel's rule)" in staging
    # Every other channel: the server's own rule, said as such.
    other = line(lines, "in every other channel, `ops_deploy`")
    assert "U0DAVE (from the tool's Approval)" in other and "this channel's rule" not in other
    assert line(lines, "in `C0DEPLOYS`, `ops_status`").endswith(": runs without approval")
