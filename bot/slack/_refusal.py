"""The refusal of a person's answer: raised where a check fails, shown to them (ephemeral) and
audited by `Answers`."""

from __future__ import annotations

__all__ = ["Refusal"]


class Refusal(Exception):
    """Why a person's answer was not taken; the message is shown to them as is."""
