"""How the SQLite store reads an interaction's row: its columns, in the order the store decodes
them, and decoding them."""

from __future__ import annotations

from typing import Any

from ._codec import INTERACTION_OVERLAY, decode_interaction
from ._records import InteractionRecord

__all__ = ["IX_COLUMNS", "SELECT_IX", "decode_ix"]

IX_COLUMNS = ", ".join(("interaction_id", "rec", *INTERACTION_OVERLAY))
SELECT_IX = f"SELECT {IX_COLUMNS} FROM interactions WHERE interaction_id = ?"


def decode_ix(row: tuple[Any, ...]) -> InteractionRecord:
    interaction_id = row[0]
    return decode_interaction(
        row[1],
        key=f"interactions/{interaction_id}",
        interaction_id=interaction_id,
        overlay=dict(zip(INTERACTION_OVERLAY, row[2:], strict=True)),
    )
