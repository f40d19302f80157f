"""Standing grants: an approver's "approve later calls of this tool here" for a while.

A grant is given with an approval (the card's "Approve for this thread" button); its id derives
from that interaction, so a retried click records the same grant once. Both stores keep it until
it expires (and a grace period after, so a late revoke reads "expired", not "unknown").

A grant covers no more than the approval it was given with: the same tool at the same place in
the agent tree (`path`), the thread or channel it names, the requests of the people it names
(`requesters`) and, where the rule pins some, the same argument values. Grants stored before
those bounds existed name a bare tool; they read back (`needs_renewal`) and cover nothing.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from ._approval import GrantScope
from ._codec import text
from ._errors import CorruptRecordError, UsageError
from ._kinds import is_approval
from ._records import InteractionRecord

__all__ = [
    "GRANT_OVERLAY",
    "Grant",
    "GrantClaim",
    "check_grant",
    "decode_grant",
    "encode_grant",
    "grant_id_for",
    "used_grant",
]

GRANT_OVERLAY: Final = ("revoked_at", "revoked_by")
"""Fields of a grant that change after it is added; both stores keep them beside the JSON."""


@dataclass(kw_only=True, frozen=True)
class Grant:
    """Later calls of `tool` in this thread (or channel) run without a card, approved by
    `granted_by`, until `expires_at` or a revoke."""

    grant_id: str
    tool: str
    scope: GrantScope
    channel: str
    thread_ts: str | None
    """The thread a `thread` grant covers; None for a `channel` grant."""
    granted_by: str
    created_at: float
    expires_at: float
    interaction_id: str | None = None
    """The approval it was given with."""
    run_id: str | None = None
    revoked_at: float | None = None
    revoked_by: str | None = None
    path: str | None = None
    """Where the tool it was given on sits in the agent tree (`outer.inner.tool`, the
    approval's `runnable_path`): a tool of the same name elsewhere is another tool. None in
    grants stored before grants were bound to one: those cover nothing (`needs_renewal`)."""
    requesters: tuple[str, ...] = ()
    """Whose requests it covers: the requester of the request it was given on, and the users
    its rule names (`Approval.grant_requesters`)."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Argument values a covered call must have (`Approval.grant_arguments`, as approved)."""

    @property
    def needs_renewal(self) -> bool:
        """Stored before grants were bound to a tool path and requesters: never used."""
        return not self.path or not self.requesters

    def active(self, now: float) -> bool:
        """Not revoked and not expired at `now`."""
        return self.revoked_at is None and self.expires_at > now

    def covers(self, tool: str, *, channel: str, thread_ts: str | None) -> bool:
        """Whether a call of a tool named `tool` in that thread of that channel is where the
        grant applies (the stores' look-up; `mismatch` decides whether it covers a request)."""
        if tool != self.tool or channel != self.channel:
            return False
        return self.scope == "channel" or (thread_ts is not None and thread_ts == self.thread_ts)

    def mismatch(self, record: InteractionRecord) -> str | None:
        """Why the grant does not cover the approval `record` asks for, or None when it does:
        the same tool at the same path, in its thread or channel, asked by people it names
        only, with the argument values it pins. Expiry and revokes are the store's to check."""
        if self.needs_renewal:
            return "it was stored before grants were bound to a tool and requesters"
        if not is_approval(record) or record.payload.get("tool") != self.tool:
            return "it was given on another tool"
        if record.runnable_path != self.path:
            return f"it was given on the tool at `{self.path}`, not `{record.runnable_path}`"
        if not self.covers(self.tool, channel=record.channel, thread_ts=record.thread_ts):
            return f"it covers another {self.scope}"
        askers = {*record.requesters, *([record.requester] if record.requester else [])}
        if record.requester is None or not askers <= set(self.requesters):
            return "it does not cover requests by everyone who asked for this one"
        arguments = record.payload.get("arguments")
        for name, value in self.arguments.items():
            if not isinstance(arguments, dict) or name not in arguments or arguments[name] != value:
                return f"it covers only calls with the same `{name}`"
        return None


@dataclass(kw_only=True)
class GrantClaim:
    """The outcome of revoking a grant; only the first revoke of an active grant wins."""

    won: bool
    grant: Grant | None
    """The grant as stored after the attempt; None when there is no such grant."""


_GRANT = TypeAdapter(Grant)


def grant_id_for(interaction_id: str) -> str:
    """The id of the grant given with an approval: the same on every retry of the click."""
    return "grant_" + hashlib.sha256(interaction_id.encode()).hexdigest()[:16]


def used_grant(record: InteractionRecord) -> str | None:
    """The id of the grant an approval was answered under, if it was (its answer names it)."""
    answer = record.answer
    if not is_approval(record) or record.status != "answered" or not isinstance(answer, dict):
        return None
    grant_id = answer.get("grant")
    return grant_id if isinstance(grant_id, str) and grant_id.startswith("grant_") else None


def check_grant(grant: Grant) -> None:
    """Refuse a grant that could not be stored or looked up sensibly (a developer mistake)."""
    for name in ("created_at", "expires_at"):
        value = getattr(grant, name)
        if not math.isfinite(value):
            raise UsageError(f"grant `{grant.grant_id}` has a non-finite `{name}`: {value!r}")
    if not (grant.grant_id and grant.tool and grant.channel and grant.granted_by):
        raise UsageError(f"grant {grant!r} needs an id, a tool, a channel and who gave it")
    if grant.needs_renewal:
        raise UsageError(
            f"grant `{grant.grant_id}` needs the tool's path and whose requests it covers"
        )
    if (grant.scope == "thread") != bool(grant.thread_ts):
        raise UsageError(
            f"grant `{grant.grant_id}`: a thread grant names its thread, a channel grant none"
        )
    if grant.revoked_at is not None:
        raise UsageError(f"grant `{grant.grant_id}` is added revoked")


def encode_grant(grant: Grant) -> bytes:
    return _GRANT.dump_json(grant, exclude=set(GRANT_OVERLAY))


def decode_grant(
    data: bytes | str, *, key: str, grant_id: str, overlay: Mapping[str, object]
) -> Grant:
    """The grant as added, with the fields of `GRANT_OVERLAY` found in `overlay` on top."""
    try:
        fields = pydantic_core.from_json(data)
        if not isinstance(fields, dict):
            raise CorruptRecordError(key, "grant", "it is not a JSON object")
        revoked_at, revoked_by = overlay.get("revoked_at"), overlay.get("revoked_by")
        if revoked_at is not None:
            fields["revoked_at"] = float(text(revoked_at))
        if revoked_by is not None:
            fields["revoked_by"] = text(revoked_by)
        grant = _GRANT.validate_python(fields)
    except (ValidationError, ValueError) as exc:
        raise CorruptRecordError(key, "grant", str(exc).replace("\n", " ")[:300]) from exc
    if grant.grant_id != grant_id:
        raise CorruptRecordError(key, "grant", f"it holds {grant.grant_id!r}")
    return grant
