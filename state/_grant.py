"""Standing grants: an approver's "approve later calls of this tool here" for a while.

A grant is given with an approval (the card's "Approve for this thread" button); its id derives
from that interaction, so a retried click records the same grant once. Both stores keep it until
it expires (and a grace period after, so a late revoke reads "expired", not "unknown").
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from ._approval import GrantScope
from ._codec import text
from ._errors import CorruptRecordError, UsageError

__all__ = [
    "GRANT_OVERLAY",
    "Grant",
    "GrantClaim",
    "check_grant",
    "decode_grant",
    "encode_grant",
    "grant_id_for",
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

    def active(self, now: float) -> bool:
        """Not revoked and not expired at `now`."""
        return self.revoked_at is None and self.expires_at > now

    def covers(self, tool: str, *, channel: str, thread_ts: str | None) -> bool:
        """Whether a call of `tool` in that thread of that channel is within the grant."""
        if tool != self.tool or channel != self.channel:
            return False
        return self.scope == "channel" or (thread_ts is not None and thread_ts == self.thread_ts)


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


def check_grant(grant: Grant) -> None:
    """Refuse a grant that could not be stored or looked up sensibly (a developer mistake)."""
    for name in ("created_at", "expires_at"):
        value = getattr(grant, name)
        if not math.isfinite(value):
            raise UsageError(f"grant `{grant.grant_id}` has a non-finite `{name}`: {value!r}")
    if not (grant.grant_id and grant.tool and grant.channel and grant.granted_by):
        raise UsageError(f"grant {grant!r} needs an id, a tool, a channel and who gave it")
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
