"""The command line itself: `--version`, and help for every option of every command."""

from __future__ import annotations

import argparse
import importlib.metadata
import subprocess
import sys

# The argument parser, to check every command's help without a process each.
from bot._cli import _parser


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
