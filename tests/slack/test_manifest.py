"""`manifest.yml` asks Slack for exactly what the code lists in `bot.slack._manifest`."""

from __future__ import annotations

import re
from pathlib import Path

# What the code asks Slack for, compared with manifest.yml.
from bot.slack._manifest import BOT_EVENTS, BOT_SCOPES, COMMANDS, HOME_TAB_ENABLED

MANIFEST = Path(__file__).resolve().parents[2] / "manifest.yml"


def _list_under(key: str, text: str) -> list[str]:
    """The `- item` lines right under `key:` (comments dropped); no YAML library needed for
    this file's plain block lists."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"{key}:")
    items = []
    for line in lines[start + 1 :]:
        match = re.match(r"^\s*-\s*([^\s#]+)", line)
        if match is None:
            if line.strip().startswith("#"):
                continue
            break
        items.append(match.group(1))
    return items


def test_manifest_matches_the_code() -> None:
    text = MANIFEST.read_text()
    assert _list_under("bot", text) == list(BOT_SCOPES)
    assert _list_under("bot_events", text) == list(BOT_EVENTS)
    commands = re.findall(r"^\s*-\s*command:\s*(\S+)", text, flags=re.M)
    assert commands == list(COMMANDS)
    [home_tab] = re.findall(r"^\s*home_tab_enabled:\s*(\w+)", text, flags=re.M)
    assert home_tab == str(HOME_TAB_ENABLED).lower()
