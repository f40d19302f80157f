"""Configuration and the command line: one clear line and exit code 2 for every mistake."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot import chatops
from bot.slack import AnswerPolicy, ConfigError, Settings, load_settings
from state import InteractionRecord

ROOT = Path(__file__).resolve().parents[2]
HANDBACK = Path(sys.executable).parent / "handback"

GOOD = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "secret"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith(("SLACK_", "HANDBACK_", "OPENAI_")) or key in {"PORT", "HOST"}:
            monkeypatch.delenv(key)
    return monkeypatch


def _settings(env: pytest.MonkeyPatch, **values: str) -> Settings:
    for key, value in {**GOOD, **values}.items():
        env.setenv(key, value)
    return load_settings()


def test_defaults(env: pytest.MonkeyPatch) -> None:
    settings = _settings(env)
    assert settings.port == 3000
    assert settings.slack_api_url == "https://slack.com/api/"
    assert settings.handback_store == "sqlite:///handback.db"
    assert settings.handback_interaction_ttl == 24 * 3600
    assert settings.socket_mode is False
    assert settings.handback_approvers == []


def test_durability_settings(env: pytest.MonkeyPatch) -> None:
    defaults = _settings(env)
    assert defaults.handback_sweep_interval == 2.0
    assert defaults.handback_liveness_ttl == 15.0
    assert defaults.handback_stall_limit == 30.0
    assert defaults.handback_concurrency == 1000
    assert defaults.handback_shutdown_grace == 30.0
    tuned = _settings(
        env,
        HANDBACK_LIVENESS_TTL="2s",
        HANDBACK_CONCURRENCY="50",
        HANDBACK_SHUTDOWN_GRACE="1m",
        HANDBACK_STORE="redis+cluster://127.0.0.1:7000/?prefix=team:",
    )
    assert (tuned.handback_liveness_ttl, tuned.handback_concurrency) == (2.0, 50)
    assert tuned.handback_shutdown_grace == 60.0
    assert tuned.handback_store.startswith("redis+cluster://")
    for name, value in [("HANDBACK_CONCURRENCY", "0"), ("HANDBACK_LIVENESS_TTL", "-1")]:
        with pytest.raises(ConfigError, match=f"{name} is invalid"):
            _settings(env, **{name: value})


@pytest.mark.parametrize("removed", ["HANDBACK_WORK_LEASE", "HANDBACK_THREAD_LEASE_TTL"])
def test_a_removed_lease_setting_names_its_replacement(
    env: pytest.MonkeyPatch, removed: str
) -> None:
    with pytest.raises(ConfigError) as error:
        _settings(env, **{removed: "5s"})
    assert str(error.value) == (
        f"{removed} was removed: set HANDBACK_LIVENESS_TTL instead (see docs/operations.md)"
    )
    assert "\n" not in str(error.value)


def test_policy_settings_parse(env: pytest.MonkeyPatch) -> None:
    settings = _settings(
        env,
        HANDBACK_APPROVERS="U01, S02 W03",
        HANDBACK_TOOL_APPROVERS='{"deploy": ["S0OPS"], "restart": "U1 U2"}',
        HANDBACK_INTERACTION_TTL="30m",
        HANDBACK_ALLOW_SELF_APPROVAL="yes",
        SLACK_API_URL="http://127.0.0.1:9/api",
        SLACK_APP_TOKEN="xapp-1",
    )
    assert settings.handback_approvers == ["U01", "S02", "W03"]
    assert settings.handback_tool_approvers == {"deploy": ["S0OPS"], "restart": ["U1", "U2"]}
    assert settings.handback_interaction_ttl == 1800
    assert settings.handback_allow_self_approval is True
    assert settings.slack_api_url == "http://127.0.0.1:9/api/"
    assert settings.socket_mode is True


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"SLACK_BOT_TOKEN": ""}, "SLACK_BOT_TOKEN is invalid"),
        ({"SLACK_BOT_TOKEN": "xoxp-user"}, "SLACK_BOT_TOKEN is invalid: must be a bot token"),
        ({"SLACK_SIGNING_SECRET": ""}, "SLACK_SIGNING_SECRET is missing"),
        ({"SLACK_APP_TOKEN": "xoxb-wrong"}, "SLACK_APP_TOKEN is invalid"),
        ({"PORT": "http"}, "PORT is invalid"),
        ({"HANDBACK_STORE": "postgres://x"}, "HANDBACK_STORE is invalid"),
        ({"HANDBACK_APPROVERS": "alice"}, "HANDBACK_APPROVERS is invalid"),
        ({"HANDBACK_TOOL_APPROVERS": "{deploy"}, "HANDBACK_TOOL_APPROVERS is invalid"),
        ({"HANDBACK_TOOL_APPROVERS": "[]"}, "HANDBACK_TOOL_APPROVERS is invalid"),
        ({"HANDBACK_INTERACTION_TTL": "soon"}, "HANDBACK_INTERACTION_TTL is invalid"),
        ({"HANDBACK_INTERACTION_TTL": "0"}, "HANDBACK_INTERACTION_TTL is invalid"),
        ({"SLACK_API_URL": "slack.com"}, "SLACK_API_URL is invalid"),
    ],
)
def test_bad_settings_name_the_variable(
    env: pytest.MonkeyPatch, values: dict[str, str], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(env, **values)
    message = str(caught.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_missing_bot_token(env: pytest.MonkeyPatch) -> None:
    env.setenv("SLACK_SIGNING_SECRET", "s")
    with pytest.raises(ConfigError, match=r"^SLACK_BOT_TOKEN is missing$"):
        load_settings()


def _handback(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    return subprocess.run(
        [str(HANDBACK), *args],
        cwd=ROOT,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["run"], {}, "handback: SLACK_BOT_TOKEN is missing\n"),
        (
            ["run", "bot.chatops:missing"],
            GOOD,
            "handback: module `bot.chatops` has no attribute `missing`\n",
        ),
        (
            ["run"],
            {**GOOD, "OPENAI_API_KEY": ""},
            "handback: OPENAI_API_KEY is missing (agent `chatops` uses model "
            "`openai/gpt-4o-mini`)\n",
        ),
        (["run"], {**GOOD, "HANDBACK_INTERACTION_TTL": "-1"}, None),
    ],
)
def test_cli_fails_with_one_line(
    args: list[str], env: dict[str, str], expected: str | None
) -> None:
    result = _handback(*args, env={"OPENAI_API_KEY": "", **env})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    if expected is not None:
        assert result.stderr == expected


async def test_policy_groups_and_rules() -> None:
    members = {"S0OPS": frozenset({"U0BOB"})}

    async def lookup(group: str) -> frozenset[str]:
        return members.get(group, frozenset())

    def approval(tool: str) -> InteractionRecord:
        return InteractionRecord(
            interaction_id="i",
            run_id="r",
            kind="approval",
            payload={"tool": tool, "arguments": {}},
            requester="U0ALICE",
        )

    question = InteractionRecord(interaction_id="q", run_id="r", kind="ask_user", payload={})
    policy = AnswerPolicy(approvers=("S0OPS",), tool_approvers={"restart": ("U0CAROL",)})
    assert await policy.refusal(approval("deploy"), "U0BOB", lookup) is None
    assert await policy.refusal(approval("deploy"), "U0CAROL", lookup) is not None
    assert await policy.refusal(approval("restart"), "U0CAROL", lookup) is None
    assert await policy.refusal(approval("restart"), "U0BOB", lookup) is not None
    assert await policy.refusal(question, "U0ANYONE", lookup) is None
    # The requester may not approve, even when listed.
    listed = AnswerPolicy(approvers=("U0ALICE",))
    assert await listed.refusal(approval("deploy"), "U0ALICE", lookup) is not None
    allowed = AnswerPolicy(approvers=("U0ALICE",), allow_self_approval=True)
    assert await allowed.refusal(approval("deploy"), "U0ALICE", lookup) is None
    # The flag never admits a requester who is not on the list; withdrawing stays allowed.
    unlisted = AnswerPolicy(approvers=("U0BOB",), allow_self_approval=True)
    assert await unlisted.refusal(approval("deploy"), "U0ALICE", lookup) is not None
    assert await unlisted.refusal(approval("deploy"), "U0ALICE", lookup, denying=True) is None
    per_tool = AnswerPolicy(tool_approvers={"deploy": ("U0BOB",)}, allow_self_approval=True)
    assert await per_tool.refusal(approval("deploy"), "U0ALICE", lookup) is not None
    narrowed = AnswerPolicy(answerers=("S0OPS",))
    assert await narrowed.refusal(question, "U0BOB", lookup) is None
    assert await narrowed.refusal(question, "U0DAVE", lookup) is not None


def test_chatops_agent_tools_are_stable() -> None:
    tools = chatops.agent.tools
    assert sorted(tools) == sorted(
        ["deploy", "restart", "fleet_status", "ask_user", "ask_user_multi", "confirm"]
    )
    assert tools["deploy"].requires_approval is chatops.deploy_approval
    assert set(tools["deploy"].parameters["properties"]) == {"service", "version", "environment"}
    assert set(tools["restart"].parameters["properties"]) == {"service", "environment"}
    assert set(tools["fleet_status"].parameters["properties"]) == {"environment"}


def test_slack_package_exports() -> None:
    import bot.slack

    assert bot.slack.__all__ == sorted(bot.slack.__all__)
    for name in bot.slack.__all__:
        assert hasattr(bot.slack, name)


def test_manifest_asks_for_what_the_app_uses() -> None:
    text = (ROOT / "manifest.yml").read_text()
    lines = {line.split("#", 1)[0].strip() for line in text.splitlines()}
    for scope in ["app_mentions:read", "chat:write", "im:history", "channels:history"]:
        assert f"- {scope}" in lines
    for scope in ["reactions:write", "usergroups:read", "assistant:write", "mpim:history"]:
        assert f"- {scope}" in lines
    assert "- users:read" in lines  # doctor looks approvers up (users.info)
    for event in ["app_mention", "message.im", "message.mpim", "message.channels"]:
        assert f"- {event}" in lines
    assert "- agent_session_stopped" in lines
    assert "agent_view:" in lines
    assert "is_enabled: true" in lines  # interactivity
    assert "socket_mode_enabled: true" in lines


def test_manifest_lists_the_slash_commands_of_the_example_agent() -> None:
    from bot.chatops import agent

    lines = (ROOT / "manifest.yml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "slash_commands:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    section: list[str] = []
    for line in lines[start + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        section.append(line.split("#", 1)[0].strip())
    listed = [line.removeprefix("- command:").strip() for line in section if "command:" in line]
    assert listed == sorted(agent.commands) == ["/deploy"]
    scopes = {line.split("#", 1)[0].strip() for line in lines}
    assert "- commands" in scopes


@pytest.mark.slow
def test_cli_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _handback(
            "run",
            env={
                **GOOD,
                "OPENAI_API_KEY": "k",
                "HANDBACK_APPROVERS": "U0BOB",
                "HOST": "127.0.0.1",
                "PORT": str(port),
                "HANDBACK_STORE": f"sqlite:///{tmp_path / 'h.db'}",
            },
        )
    assert result.returncode == 2
    assert result.stderr.startswith(f"handback: cannot listen on 127.0.0.1:{port}")
    assert result.stderr.count("\n") == 1


def test_only_a_process_that_hears_slack_needs_the_signing_secret(env: pytest.MonkeyPatch) -> None:
    env.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    assert load_settings(role="worker").slack_signing_secret is None
    for role in ("all", "web"):
        with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET is missing"):
            load_settings(role=role)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_worker_starts_without_a_signing_secret(tmp_path: Path) -> None:
    """`handback run --role worker` works the inbox and answers /healthz; it never hears Slack,
    so it asks for neither the signing secret nor an app token."""
    import json
    import os
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    process = subprocess.Popen(
        [str(HANDBACK), "run", "--role", "worker"],
        cwd=ROOT,
        env={
            **base,
            "SLACK_BOT_TOKEN": "xoxb-1",
            "OPENAI_API_KEY": "k",
            "HANDBACK_APPROVERS": "anyone",
            "HOST": "127.0.0.1",
            "PORT": str(port),
            "HANDBACK_STORE": f"sqlite:///{tmp_path / 'h.db'}",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        health = None
        while health is None and time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as got:
                    health = json.loads(got.read())
            except OSError:
                time.sleep(0.2)
        assert health is not None, process.stderr.read() if process.poll() is not None else ""
        assert health["ok"] is True and health["role"] == "worker"
    finally:
        process.terminate()
        process.wait(timeout=60)
        assert process.stderr is not None
        process.stderr.close()


@pytest.mark.parametrize("name", ["bot.py", "state.py", "blocks/__init__.py"])
def test_a_local_module_named_like_ours_is_named_in_one_line(tmp_path: Path, name: str) -> None:
    """A user's `bot.py` beside their agent would be hidden by handback's own `bot` package
    (`module 'bot' has no attribute 'agent'`); `handback run` says which file and what to do."""
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text("from bot import Agent\nagent = None\n")
    done = subprocess.run(
        [str(HANDBACK), "run", "bot:agent"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **GOOD, "OPENAI_API_KEY": "k"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"`{name}`" in done.stderr and "rename it" in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "handback: nobody may approve `deploy`: set HANDBACK_APPROVERS"),
        ({"HANDBACK_TOOL_APPROVERS": '{"restart": ["U0BOB"]}'}, "handback: nobody may approve"),
        (
            {"HANDBACK_APPROVERS": "U0BOB", "HANDBACK_TOOL_APPROVERS": '{"deplyo": ["U0BOB"]}'},
            "handback: HANDBACK_TOOL_APPROVERS names `deplyo`, but agent `chatops` has no tool",
        ),
        ({"HANDBACK_APPROVER": "U0BOB"}, "handback: HANDBACK_APPROVER is not a setting: did you"),
    ],
)
def test_a_gate_nobody_can_open_stops_start_up(env: dict[str, str], expected: str) -> None:
    """Fail closed: with no approver rule for a gated tool, `handback run` does not start."""
    result = _handback("run", env={**GOOD, "OPENAI_API_KEY": "k", **env})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(expected), result.stderr


def test_anyone_must_be_said_and_typos_are_errors(env: pytest.MonkeyPatch) -> None:
    assert _settings(env, HANDBACK_APPROVERS="anyone").approvers_anyone
    assert not _settings(env, HANDBACK_APPROVERS="U0BOB").approvers_anyone
    env.delenv("HANDBACK_APPROVERS")
    assert not _settings(env).approvers_anyone and _settings(env).handback_approvers == []
    with pytest.raises(ConfigError, match="HANDBACK_APPROVERS is invalid"):
        _settings(env, HANDBACK_APPROVERS="anyone U0BOB")
    env.delenv("HANDBACK_APPROVERS")
    env.setenv("HANDBACK_TOOL_APROVERS", "{}")
    with pytest.raises(ConfigError, match="did you mean HANDBACK_TOOL_APPROVERS"):
        _settings(env)
    env.delenv("HANDBACK_TOOL_APROVERS")
    env.setenv("HANDBACK_SOMETHING_ELSE", "1")  # not close to any setting: logged, not fatal
    assert _settings(env).port == 3000


@pytest.mark.parametrize("ttl", ["99999999d", "1e308"])
async def test_an_absurd_interaction_ttl_is_a_config_error(ttl: str) -> None:
    with pytest.raises(ConfigError, match="HANDBACK_INTERACTION_TTL"):
        load_settings(
            slack_bot_token="xoxb-x", slack_signing_secret="s", handback_interaction_ttl=ttl
        )
