"""Read-only views of the store for operators: the audit log and the cards still waiting."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TextIO

from state import open_store

__all__ = ["print_audit", "print_pending"]


def _when(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        # The stores accept far-future expiries (years are fine); a table must still print.
        return "an unknown date"


def _table(rows: list[list[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        line = "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        out.write(line.rstrip() + "\n")


async def print_audit(url: str | None, *, limit: int, as_json: bool, out: TextIO) -> int:
    """The newest `limit` audit entries, newest first; returns how many were printed."""
    async with open_store(url) as store:
        entries = await store.recent_audit(limit=limit)
    if as_json:
        for entry in entries:
            out.write(json.dumps(asdict(entry)) + "\n")
        return len(entries)
    if not entries:
        out.write("The audit log is empty.\n")
        return 0
    rows = [["when", "action", "user", "run", "interaction", "detail"]]
    rows += [
        [
            _when(e.at),
            e.action,
            e.user or "-",
            e.run_id or "-",
            e.interaction_id or "-",
            e.detail.replace("\n", " "),
        ]
        for e in entries
    ]
    _table(rows, out)
    return len(entries)


async def print_pending(url: str | None, *, limit: int, as_json: bool, out: TextIO) -> int:
    """Interactions still waiting for an answer, the ones expiring soonest first."""
    async with open_store(url) as store:
        # Every pending interaction is "due" by an infinitely late clock.
        records = await store.due_interactions(math.inf, limit=limit)
    if as_json:
        for record in records:
            out.write(json.dumps(asdict(record)) + "\n")
        return len(records)
    if not records:
        out.write("No interaction is waiting for an answer.\n")
        return 0
    rows = [["expires", "kind", "channel", "thread", "requester", "run", "interaction"]]
    rows += [
        [
            _when(r.expires_at),
            r.kind,
            r.channel or "-",
            r.thread_ts or "-",
            r.requester or "-",
            r.run_id,
            r.interaction_id,
        ]
        for r in records
    ]
    _table(rows, out)
    return len(records)
