"""The public API: what each package exports, sorted and importable."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "name", ["bot", "bot.events", "bot.mcp", "bot.tools", "bot.testing", "state", "blocks"]
)
def test_all_is_sorted_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    # isort-style, as ruff's RUF022 sorts: CONSTANTS, then Classes, then functions.
    expected = sorted(exported, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    assert exported == expected, f"{name}.__all__ is not sorted"
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr} is in __all__ but missing"


def test_runtime_imports_nothing_from_slack() -> None:
    code = (
        "import sys, bot, bot.tools, bot.events, bot.testing; "
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('slack')}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_public_names_from_the_spec() -> None:
    from bot import Agent, Cancel, Tool, suspend  # noqa: F401
    from bot.events import DeltaEvent, InteractionEvent, OutputEvent, StartEvent  # noqa: F401
    from bot.tools import ask_user, ask_user_multi, confirm  # noqa: F401


def test_one_error_root_for_the_project() -> None:
    import blocks
    import bot
    import state
    from bot.slack import ConfigError

    for error in [
        state.StoreError,
        state.StoreURLError,
        state.CorruptRecordError,
        blocks.InvalidAnswer,
        ConfigError,
        bot.UsageError,
        bot.ResumeError,
        bot.RunAlreadyResumed,
        bot.InvalidResumeValue,
    ]:
        assert issubclass(error, bot.HandbackError), error
    assert bot.HandbackError is state.HandbackError
