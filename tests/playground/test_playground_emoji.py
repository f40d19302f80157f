"""Emoji are sent as Slack shortcodes (`:unlock:`), which Slack renders; the playground renders
every one the bot sends (and the common others), so no `:name:` shows as text there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHORTCODE = re.compile(r"""["' ]:([a-z0-9_+-]+):[ "']""")
REACTION = re.compile(r'^[A-Z_]*REACTION\b[^=\n]*=\s*"([a-z0-9_+-]+)"', re.MULTILINE)


def playground_emoji() -> set[str]:
    script = (ROOT / "bot/playground/playground.js").read_text()
    start = script.index("const EMOJI = {")
    table = script[start : script.index("};", start)]
    return set(re.findall(r'"?([a-z0-9_+-]+)"?:\s*"', table))


def sent_by_the_bot() -> set[str]:
    found: set[str] = set()
    for package in ("bot", "blocks"):
        for path in (ROOT / package).rglob("*.py"):
            found |= set(SHORTCODE.findall(path.read_text()))
    return found


def test_every_emoji_the_bot_sends_is_rendered_by_the_playground() -> None:
    sent = sent_by_the_bot()
    assert {"unlock", "octagonal_sign", "warning", "bell", "arrow_up"} <= sent
    assert sent - playground_emoji() == set()


def reactions_of_the_bot() -> set[str]:
    """The reactions the bot adds: the code keeps each in a `*_REACTION` constant."""
    found: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        found |= set(REACTION.findall(path.read_text()))
    return found


def test_the_working_reaction_is_rendered_too() -> None:
    # The reaction the bot adds while it works (and any other), which the page must render too.
    reactions = reactions_of_the_bot()
    assert "hourglass_flowing_sand" in reactions
    assert reactions - playground_emoji() == set()
