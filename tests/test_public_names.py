"""Each package exports a short, sorted `__all__`: every name in it is defined, every public
name the package holds is in it, and the Slack app's coordination internals are not."""

from __future__ import annotations

import importlib
import types

import pytest

PACKAGES = ("state", "blocks", "bot", "bot.slack", "bot.mcp", "bot.playground")

SLACK_INTERNALS = frozenset(
    {
        "AnswerClaim",
        "GRANT_GRACE",
        "GrantClaim",
        "HOME_VIEWER_TTL",
        "Heartbeat",
        "Held",
        "HomeViewers",
        "InteractionClaim",
        "LIVENESS_TTL",
        "Lost",
        "Nudge",
        "NudgeKind",
        "RunClaim",
        "StoreReport",
        "ThreadLease",
        "ThreadTake",
        "TurnClaim",
        "Vote",
        "check_store",
        "nudge_times",
        "store_from_url",
    }
)
"""What only the Slack app's internals (`bot/slack/`) use of `state`: leases, turns, claims,
heartbeats, nudges. They stay in their private modules, imported from there with a line why."""


def _isort_key(name: str) -> tuple[int, str]:
    """The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions."""
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_without_duplicates(name: str) -> None:
    exported = list(importlib.import_module(name).__all__)
    assert exported == sorted(set(exported), key=_isort_key)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_exported_name_is_defined(name: str) -> None:
    package = importlib.import_module(name)
    assert [n for n in package.__all__ if not hasattr(package, n)] == []


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_of_a_package_is_exported(name: str) -> None:
    """A name imported into `__init__` without being in `__all__` is an export nobody chose."""
    package = importlib.import_module(name)
    public = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_")
        and not isinstance(value, types.ModuleType)
        and key != "annotations"  # `from __future__ import annotations`
    }
    assert sorted(public - set(package.__all__)) == []


def test_state_exports_nothing_only_the_slack_apps_internals_use() -> None:
    import state

    assert sorted(SLACK_INTERNALS & set(state.__all__)) == []
    # They are still there for the app, in their private modules.
    from state import _records

    assert hasattr(_records, "TurnClaim") and hasattr(_records, "ThreadTake")


def test_the_sort_key_is_ruffs() -> None:
    names = ["open_store", "Store", "AUDIT_CAP", "RedisStore", "RULE_KEY", "approves"]
    assert sorted(names, key=_isort_key) == [
        "AUDIT_CAP",
        "RULE_KEY",
        "RedisStore",
        "Store",
        "approves",
        "open_store",
    ]
