"""Each package exports a short, sorted `__all__`: every name in it is defined, every public
name the package holds is in it, and the Slack app's coordination internals are not."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

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
        "approves",
        "check_store",
        "grant_id_for",
        "nudge_times",
        "store_from_url",
    }
)
"""What only the Slack app's internals (`bot/slack/`) use of `state`: leases, turns, claims,
heartbeats, nudges. They stay in their private modules, imported from there with a line why."""


BLOCKS_INTERNALS = frozenset(
    {
        "HOME_BLOCK_LIMIT",
        "NOTICE_BLOCK",
        "REDACTED",
        "can_edit",
        "grant_blocks",
        "grant_used_notice",
        "mention",
    }
)
"""What of `blocks` only the Slack app's internals (or only `blocks` itself) use: the App Home's
layout, the edit form's placeholder, one notice, one text helper."""

KEPT_FOR_USERS: dict[str, str] = {
    "AuditLog": "a boundary of the public `Store` (its bases are what a store implements)",
    "ConversationStore": "a boundary of the public `Store`",
    "GrantStore": "a boundary of the public `Store`",
    "Inbox": "a boundary of the public `Store`",
    "InteractionStore": "a boundary of the public `Store`",
    "WorkItem": "what the public `Inbox.take` returns",
    "GrantScope": "the type of `Approval.grants`, which users write",
    "InteractionStatus": "the type of `InteractionRecord.status`, which users read",
    "stop_mark": "how a caller of `Agent.run` makes the `stop_seen` it passes",
}
"""Names `state` exports though only `bot/slack/` imports them in the product, each with why a
user needs it anyway."""

PRODUCT = Path(__file__).resolve().parent.parent
"""The repository root: `bot/`, `blocks/` and `bench/` are the code that uses `state`."""


def _state_importers() -> dict[str, set[str]]:
    """For each name, the product files (outside `state/`) that take it from `state`."""
    users: dict[str, set[str]] = {}
    for folder in ("bot", "blocks", "bench"):
        for path in sorted((PRODUCT / folder).rglob("*.py")):
            where = path.relative_to(PRODUCT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "state" and not node.level:
                    names = [alias.name for alias in node.names]
                elif (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "state"
                ):
                    names = [node.attr]
                else:
                    continue
                for name in names:
                    users.setdefault(name, set()).add(where)
    return users


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


def test_every_name_state_exports_has_a_user_beyond_the_slack_apps_internals() -> None:
    """A name only `bot/slack/` takes from `state` is the app's internal (it imports it from
    its module, with a line why), unless a user needs it too (`KEPT_FOR_USERS`, with why)."""
    import state

    importers = _state_importers()
    slack_only = {
        name
        for name in state.__all__
        if importers.get(name) and all(p.startswith("bot/slack/") for p in importers[name])
    }
    assert sorted(slack_only - KEPT_FOR_USERS.keys()) == []
    assert sorted(KEPT_FOR_USERS.keys() - set(state.__all__)) == []


def test_blocks_exports_nothing_only_the_slack_apps_internals_use() -> None:
    import blocks

    assert sorted(BLOCKS_INTERNALS & set(blocks.__all__)) == []
    # They are still there for the app, in their private module.
    from blocks import _home

    assert hasattr(_home, "NOTICE_BLOCK") and hasattr(_home, "grant_blocks")


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
