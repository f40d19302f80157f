"""The refusal of a person's answer: raised where a check fails, shown to them (ephemeral) and
audited by `Answers`. Someone who cannot see the request's conversation is told only
`NOT_YOURS`: what the request is (its tool, its approvers, who answered it) is not theirs to
learn from a refusal."""

from __future__ import annotations

from typing import Final

from state import HandbackError, InteractionRecord

__all__ = ["NOT_YOURS", "Refusal"]

NOT_YOURS: Final = "This is not a request you can see, so you cannot answer it."
"""The whole refusal told to someone who cannot see the request's conversation."""


class Refusal(HandbackError):
    """Why a person's answer was not taken; the message is shown to them as is, unless they
    cannot see `record`'s conversation (then they are told `NOT_YOURS`)."""

    def __init__(self, message: str, *, record: InteractionRecord | None = None) -> None:
        super().__init__(message)
        self.record = record
