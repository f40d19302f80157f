"""The command line itself: `--version`, help for every option of every command, and the
agent a `MODULE:ATTR` reference names."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys

import pytest

from bot import chatops

# The argument parser, to check every command's help without a process each, and the loading
# of an agent reference (`handback run MODULE:ATTR`) with the error it raises, in this process.
from bot._cli import AgentRefError, _parser, load_agent, main


def test_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot._cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0
    assert done.stdout.strip() == f"handback {importlib.metadata.version('handback-slack')}"


def test_every_option_of_every_command_has_help() -> None:
    parser = _parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {"run", "dev", "doctor", "audit", "pending", "grants"}
    for name, command in commands.choices.items():
        assert command.description, name
        for action in command._actions:
            assert action.help, f"`handback {name} {action.dest}` has no help"
            if isinstance(action, argparse._SubParsersAction):
                for sub, nested in action.choices.items():
                    assert nested.description, f"{name} {sub}"
                    for option in nested._actions:
                        assert option.help, f"`handback {name} {sub} {option.dest}` has no help"


def test_load_agent() -> None:
    assert load_agent("bot.chatops:agent") is chatops.agent
    for ref, expected in [
        ("bot.chatops", "is not MODULE:ATTR"),
        ("no_such_module_xyz:agent", "cannot import module `no_such_module_xyz`"),
        ("bot.chatops:nope", "has no attribute `nope`"),
        ("bot.chatops:fleet", "is a Fleet, not a bot.Agent"),
    ]:
        with pytest.raises(AgentRefError, match=expected):
            load_agent(ref)


def test_cli_help_lists_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "run" in out and "dev" in out
