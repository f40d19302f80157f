"""Views of the store for operators (the audit log, the cards still waiting, the standing
grants in force), and the one change they make from the command line: revoking a grant."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TextIO

from state import open_store

__all__ = ["print_audit", "print_grants", "print_pending", "revoke"]


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


async def print_grants(url: str | None, *, limit: int, as_json: bool, out: TextIO) -> int:
    """Standing grants in force, the ones ending soonest first; those stored before grants
    were bound to a tool path and requesters are marked as needing renewal (they approve
    nothing)."""
    async with open_store(url) as store:
        grants = await store.active_grants(now=time.time(), limit=limit)
    if as_json:
        for grant in grants:
            out.write(json.dumps({**asdict(grant), "needs_renewal": grant.needs_renewal}) + "\n")
        return len(grants)
    if not grants:
        out.write("No standing grant is in force.\n")
        return 0
    rows = [["id", "tool", "scope", "channel", "thread", "for", "given by", "until", "state"]]
    rows += [
        [
            g.grant_id,
            g.path or g.tool,
            g.scope,
            g.channel,
            g.thread_ts or "-",
            ",".join(g.requesters) or "-",
            g.granted_by,
            _when(g.expires_at),
            "needs renewal" if g.needs_renewal else "in force",
        ]
        for g in grants
    ]
    _table(rows, out)
    return len(grants)


async def revoke(url: str | None, grant_id: str, *, by: str, out: TextIO) -> bool:
    """Revoke a grant now, audited as `by`; says what happened, True when it was in force."""
    from .slack._grants import revoke_grant

    async with open_store(url) as store:
        claim = await revoke_grant(store, grant_id, by=by, now=time.time())
    grant = claim.grant
    if grant is None:
        out.write(f"There is no grant {grant_id!r} (`handback grants` lists them).\n")
        return False
    what = f"`{grant.tool}` in {grant.channel}" + (
        f" thread {grant.thread_ts}" if grant.thread_ts else ""
    )
    if claim.won:
        out.write(f"Revoked grant {grant_id}: {what}, given by {grant.granted_by}.\n")
        return True
    if grant.revoked_at is not None:
        out.write(
            f"Grant {grant_id} ({what}) was already revoked by {grant.revoked_by} "
            f"at {_when(grant.revoked_at)}.\n"
        )
    else:
        out.write(f"Grant {grant_id} ({what}) already ended at {_when(grant.expires_at)}.\n")
    return False
