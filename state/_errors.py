"""The project's error root, and the errors a store raises apart from losing a claim (which is a
normal result). The root lives here because `state` is the package every other one depends on;
`bot` re-exports it. The whole tree, every package's errors, is drawn once, in `bot/_errors.py`.
"""

from __future__ import annotations

__all__ = [
    "ApprovalRuleError",
    "CorruptRecordError",
    "HandbackError",
    "StoreClosedError",
    "StoreError",
    "StoreURLError",
    "UsageError",
]


class HandbackError(Exception):
    """Root of the errors handback raises, in every package: `except HandbackError` catches
    them all, and nothing else."""


class UsageError(HandbackError, TypeError, ValueError):
    """The API was called in a way that can never work; fix the calling code. A `TypeError` and
    a `ValueError` both, so that code written against either keeps catching it."""


class StoreError(HandbackError):
    """Root of the errors raised by `state`; raised as is when the backend fails, with the
    redis-py or sqlite3 error as its `__cause__`."""


class StoreURLError(StoreError, ValueError):
    """The store URL has an unknown scheme or a malformed path; credentials are masked. A
    setting's mistake (like `ConfigError`), so not a `UsageError`."""


class StoreClosedError(StoreError, UsageError):
    """The store was used after `aclose()` (a mistake of the calling code)."""


class CorruptRecordError(StoreError):
    """A stored value is not valid JSON of the record it should be; `key` names where it lives."""

    def __init__(self, key: str, kind: str, reason: str) -> None:
        super().__init__(f"stored {kind} at `{key}` is corrupt: {reason}")
        self.key = key
        self.kind = kind


class ApprovalRuleError(UsageError):
    """An `Approval` was built with values that can never work; the message says which."""
