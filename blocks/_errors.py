"""The one error `blocks` raises for anything a person (or a forged payload) sent back."""

from __future__ import annotations

from state import HandbackError

__all__ = ["InvalidAnswer"]


class InvalidAnswer(HandbackError, ValueError):
    """An answer that cannot be accepted: malformed, tampered with, or not valid for the schema.

    `str(error)` is a sentence to show the person (an ephemeral message); `errors` maps modal
    block ids to inline messages, ready for `ack(response_action="errors", errors=...)`.
    """

    def __init__(self, message: str, *, errors: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors: dict[str, str] = dict(errors or {})
