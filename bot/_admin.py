"""Views of the store for operators (the audit log, the cards still waiting, the standing
grants in force), and the one change they make from the command line: revoking a grant."""

from __future__ import annotations

import csv
import json
import re
import time
from dataclasses import asdict, fields
from datetime import UTC, datetime
from typing import Any, Literal, TextIO, assert_never

from blocks import show_hidden
from state import AUDIT_CAP, AuditEntry, InteractionRecord, is_approval, open_store

from ._audit_filter import AuditFilter, tool_of
from ._redact import redact
from .slack._grants import revoke_grant

__all__ = ["print_audit", "print_grants", "print_pending", "revoke", "safe"]

_AUDIT_FIELDS = [f.name for f in fields(AuditEntry)]
# C0 and C1 controls and DEL: ESC starts the sequences that move the cursor or retitle a window.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


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


def safe(text: str) -> str:
    """`text` fit for a terminal: line breaks and tabs as spaces, every other control, bidi or
    invisible character spelled `\\uXXXX` (an escape sequence in a detail or an argument could
    rewrite the screen or hide what a person is shown)."""
    flat = " ".join(text.replace("\t", " ").splitlines())
    return show_hidden(_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", flat))


def _age(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _csv_cell(value: object) -> str:
    text = safe("" if value is None else str(value))
    # A spreadsheet runs a cell that starts like a formula; text we did not write must not.
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


async def print_audit(
    url: str | None,
    *,
    limit: int,
    output: Literal["table", "json", "csv"],
    where: AuditFilter | None = None,
    out: TextIO,
) -> int:
    """The newest `limit` audit entries that pass `where`, newest first; returns how many were
    printed. With a filter the whole log is read (the store keeps the newest `AUDIT_CAP`)."""
    where = where or AuditFilter()
    async with open_store(url) as store:
        entries = await store.recent_audit(limit=AUDIT_CAP if where.active else limit)
        interactions: dict[str, InteractionRecord | None] = {}
        chosen: list[AuditEntry] = []
        for entry in entries:
            record = None
            if where.needs_interaction and entry.interaction_id:
                if entry.interaction_id not in interactions:
                    interactions[entry.interaction_id] = await store.get_interaction(
                        entry.interaction_id
                    )
                record = interactions[entry.interaction_id]
            if where.matches(entry, record):
                chosen.append(entry)
                if len(chosen) == limit:
                    break
    match output:
        case "json":
            for entry in chosen:
                out.write(json.dumps(asdict(entry)) + "\n")
        case "csv":
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(_AUDIT_FIELDS)
            for entry in chosen:
                row = asdict(entry)
                writer.writerow([_csv_cell(row[name]) for name in _AUDIT_FIELDS])
        case "table":
            if not chosen:
                out.write(
                    "No audit entry matches.\n" if where.active else "The audit log is empty.\n"
                )
                return 0
            rows = [["when", "action", "user", "run", "interaction", "detail"]]
            rows += [
                [
                    _when(e.at),
                    e.action,
                    safe(e.user or "-"),
                    safe(e.run_id or "-"),
                    safe(e.interaction_id or "-"),
                    safe(e.detail),
                ]
                for e in chosen
            ]
            _table(rows, out)
        case unreachable:
            assert_never(unreachable)
    return len(chosen)


def _pending_view(record: InteractionRecord, now: float) -> dict[str, Any]:
    """What `pending` shows of one interaction; arguments and payload with every
    secret-looking value hidden (the runtime hid the tool's own `redact` names already)."""
    approval = is_approval(record)
    arguments = record.payload.get("arguments") if approval else None
    return {
        "interaction_id": record.interaction_id,
        "run_id": record.run_id,
        "kind": record.kind,
        "tool": tool_of(record),
        "arguments": redact(arguments) if approval else None,
        "payload": None if approval else redact(record.payload),
        "requester": record.requester,
        "channel": record.channel,
        "thread_ts": record.thread_ts,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "age_seconds": max(0.0, now - record.created_at),
        "votes": len(record.votes),
    }


async def print_pending(url: str | None, *, limit: int, as_json: bool, out: TextIO) -> int:
    """Interactions still waiting for an answer, the ones expiring soonest first."""
    async with open_store(url) as store:
        records = await store.pending_interactions(limit=limit)
    now = time.time()
    views = [_pending_view(record, now) for record in records]
    if as_json:
        for view in views:
            out.write(json.dumps(view, default=str) + "\n")
        return len(views)
    if not views:
        out.write("No interaction is waiting for an answer.\n")
        return 0
    rows = [["expires", "age", "kind", "tool", "arguments", "requester", "channel", "interaction"]]
    for view in views:
        shown = view["arguments"] if view["kind"] == "approval" else view["payload"]
        rows.append(
            [
                _when(view["expires_at"]),
                _age(view["age_seconds"]),
                safe(view["kind"]),
                safe(view["tool"] or "-"),
                safe(_cut(_compact(shown))),
                safe(view["requester"] or "-"),
                safe(view["channel"] or "-"),
                safe(view["interaction_id"]),
            ]
        )
    _table(rows, out)
    return len(views)


def _compact(value: Any) -> str:
    if value in (None, {}, []):
        return "-"
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _cut(text: str, limit: int = 80) -> str:
    # `--json` carries it whole; a table row stays one screen line or so.
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
            safe(g.grant_id),
            safe(g.path or g.tool),
            g.scope,
            safe(g.channel),
            safe(g.thread_ts or "-"),
            safe(",".join(g.requesters) or "-"),
            safe(g.granted_by),
            _when(g.expires_at),
            "needs renewal" if g.needs_renewal else "in force",
        ]
        for g in grants
    ]
    _table(rows, out)
    return len(grants)


async def revoke(url: str | None, grant_id: str, *, by: str, out: TextIO) -> bool:
    """Revoke a grant now, audited as `by`; says what happened, True when it was in force."""
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
