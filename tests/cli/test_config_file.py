"""Reading `handback.toml`: the documented example makes the agent it says; a wrong file is
refused with one line per problem, each naming the field's path, by `agent_from_file` and by
`handback run FILE.toml` (exit code 2, no traceback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot import Approval, ConfigFileError, agent_from_file

HANDBACK = Path(sys.executable).parent / "handback"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "config-file.md"

SCHEMA_PROBLEMS = """
name = "ops"
model = 3
modle = "openai/gpt-4.1-mini"

[servers.repo]
command = ["mcp-server-git"]
url = "https://mcp.example.com/mcp"

[servers.tickets]
url = "https://mcp.example.com/mcp"
approval = false
approvals = { close_ticket = { count = "2" }, reopen = { approvers = ["bob"] } }

[[tools]]
import = "myops:restart"
approval = { count = 2, grants = ["forever"] }

[channels.C0AAA]
tools = "repo"
"""

NAME_PROBLEMS = """
name = "ops"
model = "gpt-4.1-mini"

[servers.tickets]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${HANDBACK_TEST_UNSET_TOKEN}" }

[[tools]]
import = "no_such_module_xyz:restart"

[channels.ops]
tools = ["tickets"]

[channels.C0AAA]
tools = ["tickets_close", "repo"]
"""


def test_the_documented_example_makes_the_agent_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = re.search(r"```toml\n(.*?)```", DOCS.read_text(), re.S)
    assert found is not None
    (tmp_path / "handback.toml").write_text(found.group(1))
    (tmp_path / "myops.py").write_text(
        'def restart_service(service: str) -> str:\n    """Restart a service."""\n'
        '    return f"restarted {service}"\n'
    )
    monkeypatch.setenv("TICKETS_TOKEN", "sk-test")
    monkeypatch.syspath_prepend(str(tmp_path))  # undone after the test, unlike the reader's
    agent = agent_from_file(tmp_path / "handback.toml")
    assert agent.name == "ops" and agent.system_prompt is not None
    assert [t.name for t in agent.toolsets] == ["repo", "tickets"]
    [restart] = agent.tools.values()  # the servers' tools are known once they run
    approval = restart.requires_approval
    assert approval == Approval(approvers=["S0SRE"], grants=["thread"], grant_ttl=1800)
    assert agent.channels is not None
    assert agent.channels.entries("C0DEPLOYS") == ("repo", "restart_service")
    assert agent.channels.entries("C0ELSEWHERE") == ("repo_git_status",)


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "handback.toml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as raised:
        agent_from_file(path)
    return list(raised.value.problems)


def test_each_problem_of_the_files_shape_is_one_line_naming_its_field(tmp_path: Path) -> None:
    assert _problems(tmp_path, SCHEMA_PROBLEMS) == [
        "model: Input should be a valid string",
        "servers.repo: give either `command` (stdio) or `url` (streamable HTTP)",
        "servers.tickets.approval: `false` would run every tool unapproved; name the tools "
        "that need none in `approvals` (`tool = false`)",
        "servers.tickets.approvals.close_ticket.count: Input should be a valid integer",
        "servers.tickets.approvals.reopen: approvers: 'bob' is not a Slack user (U…, W…) or "
        "user group (S…) id",
        "tools[0].approval.grants[0]: Input should be 'thread' or 'channel'",
        "channels.C0AAA.tools: Input should be a valid list",
        "modle: not a field handback reads (a typo?)",
    ]


def test_names_the_file_cannot_resolve_are_one_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HANDBACK_TEST_UNSET_TOKEN", raising=False)
    assert _problems(tmp_path, NAME_PROBLEMS) == [
        "model: model 'gpt-4.1-mini' is not supported: use 'openai/<model-name>' (any "
        "OpenAI-compatible server via OPENAI_BASE_URL) or a bot.testing.FunctionModel",
        "servers.tickets.headers.Authorization: environment variable "
        "`HANDBACK_TEST_UNSET_TOKEN` is not set",
        "tools[0].import: cannot import `no_such_module_xyz`: No module named 'no_such_module_xyz'",
        "channels.ops: not a Slack channel id (C…, G…, D…) or '*' (every other channel)",
        "channels.C0AAA.tools[1]: 'repo' names no server or tool of this agent (servers and "
        "tools: tickets)",
    ]


def test_a_file_that_is_not_toml_says_so(tmp_path: Path) -> None:
    [problem] = _problems(tmp_path, 'name = "ops"\nmodel = \n')
    assert problem.startswith("is not TOML: ")


def test_a_set_variable_is_no_problem_and_its_value_is_in_no_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HANDBACK_TEST_UNSET_TOKEN", "sk-very-secret")
    problems = _problems(tmp_path, NAME_PROBLEMS)
    assert len(problems) == 4
    assert not any("HANDBACK_TEST_UNSET_TOKEN" in p or "sk-very-secret" in p for p in problems)


@pytest.mark.slow
def test_handback_run_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "handback.toml"
    path.write_text(SCHEMA_PROBLEMS)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "HANDBACK_"))}
    done = subprocess.run(
        [str(HANDBACK), "run", str(path)],
        cwd=tmp_path,
        env={**base, "SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "secret"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == f"handback: {path}: 8 problems"
    assert lines[1:] == [f"  {p}" for p in _problems(tmp_path, SCHEMA_PROBLEMS)]


CHANNEL_RULE_SHAPES = """
name = "ops"
model = "openai/gpt-4.1-mini"

[servers.tickets]
url = "https://mcp.example.com/mcp"

[channels.C0PROD]
tools = ["tickets"]

[channels.C0PROD.approvals]
tickets_close = { count = "2" }
tickets_open = { approvers = ["bob"] }
tickets_list = "yes"
tickets_x = { cuont = 2 }
"""

CHANNEL_RULE_NAMES = """
name = "ops"
model = "openai/gpt-4.1-mini"

[servers.tickets]
url = "https://mcp.example.com/mcp"

[servers.repo]
url = "https://mcp.example.com/repo"

[channels.C0PROD]
tools = ["tickets"]
approvals = { repo_commit = true, wiki_edit = { count = 2 }, "tickets_*" = { count = 2 } }
"""


def test_a_channels_rules_are_checked_like_any_rule_each_problem_naming_its_field(
    tmp_path: Path,
) -> None:
    assert _problems(tmp_path, CHANNEL_RULE_SHAPES) == [
        "channels.C0PROD.approvals.tickets_close.count: Input should be a valid integer",
        "channels.C0PROD.approvals.tickets_open: approvers: 'bob' is not a Slack user (U…, W…) "
        "or user group (S…) id",
        "channels.C0PROD.approvals.tickets_list: Input should be a valid dictionary or instance "
        "of RuleFile",
        "channels.C0PROD.approvals.tickets_x.cuont: not a field handback reads (a typo?)",
    ]


def test_a_channel_rule_must_name_a_tool_offered_in_that_channel(tmp_path: Path) -> None:
    assert _problems(tmp_path, CHANNEL_RULE_NAMES) == [
        "channels.C0PROD.approvals.repo_commit: 'repo_commit' is not offered in this channel "
        "(its `tools`: tickets), so a rule for it there would never apply",
        "channels.C0PROD.approvals.wiki_edit: 'wiki_edit' names no tool of this agent (a tool's "
        "name as the model sees it, or a glob: `repo_git_*`)",
    ]


def test_a_channels_rules_become_the_agents_channel_rules(tmp_path: Path) -> None:
    path = tmp_path / "handback.toml"
    path.write_text(
        CHANNEL_RULE_NAMES.replace("repo_commit = true, wiki_edit = { count = 2 }, ", "")
    )
    agent = agent_from_file(path)
    assert agent.channel_rules is not None
    assert agent.channel_rules.rule("C0PROD", "tickets_close") == (True, Approval(count=2))
    assert agent.channel_rules.rule("C0STAGING", "tickets_close") == (False, False)
