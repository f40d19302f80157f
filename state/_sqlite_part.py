"""What every half of `SQLiteStore` may call on the store: declared once here, defined by
`SQLiteStore` itself (the halves are mixins, each one concept: answers, nudges, inbox, grants)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from ._records import InteractionClaim

__all__ = ["SQLitePart"]

_T = TypeVar("_T")


class SQLitePart:
    """The base of `SQLiteStore`'s halves; calling one of these on a half alone is a bug."""

    async def _call(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """`work` run on the store's database thread, its errors turned into the store's."""
        raise NotImplementedError

    async def _claim_interaction(
        self, interaction_id: str, update: str, params: tuple[Any, ...]
    ) -> InteractionClaim:
        """One conditional UPDATE of an interaction, and the record as it is after it."""
        raise NotImplementedError
