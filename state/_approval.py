"""`Approval`: one value for an approval rule, from `Tool(requires_approval=...)` to the card.

The runtime puts the rule a call is gated by into the approval's payload (`payload["rule"]`,
JSON, left out of the interaction id so that a changed rule does not orphan a paused request);
the Slack app, the card and the store read it back from there with `approval_of`. It lives in
`state` because every package reads it and `state` is the one they all depend on.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from pydantic import TypeAdapter, ValidationError

from ._errors import ApprovalRuleError, CorruptRecordError
from ._kinds import is_approval
from ._records import InteractionRecord

__all__ = ["RULE_KEY", "Approval", "GrantScope", "approval_of"]

GrantScope = Literal["thread", "channel"]
"""Where a standing grant lets later calls of the tool run without a card."""

RULE_KEY: Final = "rule"
"""The payload key of an approval's rule."""

_GRANT_SCOPES: Final = ("thread", "channel")
_LISTS: Final = ("approvers", "grants", "grant_requesters", "grant_arguments", "escalate_to")
_USER = re.compile(r"[UW][A-Z0-9]{2,}")
# Users are U… or W… (Enterprise Grid), user groups S…; Slack ids are upper-case alphanumerics.
_PRINCIPAL = re.compile(r"[UWS][A-Z0-9]{2,}")


@dataclass(frozen=True, kw_only=True)
class Approval:
    """Who must approve a call of a tool, and how.

    `requires_approval=True` means `Approval()`: one approver from the environment's list
    (`HANDBACK_TOOL_APPROVERS` for the tool, else `HANDBACK_APPROVERS`; empty means anyone in
    the channel), never the requester.
    """

    approvers: Sequence[str] = ()
    """Users (U…/W…) and user groups (S…) who may approve; empty: the environment's list.
    Named here, they win over the environment."""
    count: int = 1
    """Distinct approvers needed (two-person rule with 2). None of them may be anyone who
    shaped the turn, whatever `HANDBACK_ALLOW_SELF_APPROVAL` says."""
    editable: bool = False
    """Approvers may edit the arguments before approving (with `count` 1 only)."""
    grants: Sequence[GrantScope] = ()
    """Standing grants an approver may give: later calls in that thread or channel run
    without a card while the grant lasts. Never with `count` above 1."""
    grant_ttl: float = 3600.0
    """Seconds a grant lasts."""
    grant_requesters: Sequence[str] = ()
    """Users (U…/W…) whose requests a grant also covers. A grant always covers the requests of
    the requester of the request it was given on, and nobody else's unless named here."""
    grant_arguments: Sequence[str] = ()
    """Arguments a grant pins: it covers later calls only when each of these has the same value
    as in the call it was given on (`("environment",)` keeps a staging grant off production).
    A grant pinning an argument the card shows redacted, or one the call lacks, is not given."""
    remind_after: float | None = None
    """Seconds after which the approvers are reminded, once; None: never."""
    escalate_to: Sequence[str] = ()
    """Who is added to the approvers (and told) when the reminder goes unanswered."""
    escalate_after: float | None = None
    """Seconds after the reminder before escalating; None: `remind_after`."""

    def __post_init__(self) -> None:
        # Lists are welcome in code (hence `Sequence`); the value keeps tuples, so that it stays
        # hashable and equal to what `approval_of` reads back.
        for name in _LISTS:
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Iterable):
                raise ApprovalRuleError(f"Approval.{name} must be a list, got {value!r}")
            object.__setattr__(self, name, tuple(value))
        for name in ("approvers", "escalate_to"):
            for entry in getattr(self, name):
                if not isinstance(entry, str) or not _PRINCIPAL.fullmatch(entry):
                    raise ApprovalRuleError(
                        f"Approval.{name}: {entry!r} is not a Slack user (U…, W…) or user "
                        "group (S…) id"
                    )
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ApprovalRuleError(
                f"Approval.count must be a whole number >= 1, got {self.count!r}"
            )
        if not isinstance(self.editable, bool):
            raise ApprovalRuleError(
                f"Approval.editable must be True or False, got {self.editable!r}"
            )
        for scope in self.grants:
            if scope not in _GRANT_SCOPES:
                raise ApprovalRuleError(
                    f'Approval.grants: {scope!r} is not a grant scope ("thread" or "channel")'
                )
        for entry in self.grant_requesters:
            if not isinstance(entry, str) or not _USER.fullmatch(entry):
                raise ApprovalRuleError(
                    f"Approval.grant_requesters: {entry!r} is not a Slack user id (U…, W…)"
                )
        for entry in self.grant_arguments:
            if not isinstance(entry, str) or not entry:
                raise ApprovalRuleError(
                    f"Approval.grant_arguments: {entry!r} is not an argument name"
                )
        if (self.grant_requesters or self.grant_arguments) and not self.grants:
            raise ApprovalRuleError(
                "Approval.grant_requesters and grant_arguments shape standing grants: they "
                "need grants"
            )
        if len(set(self.grants)) != len(self.grants):
            raise ApprovalRuleError(f"Approval.grants repeats a scope: {self.grants!r}")
        if self.grants and self.count > 1:
            raise ApprovalRuleError(
                "Approval.grants cannot be given for a tool that needs more than one approver: "
                "a standing grant would let one person approve alone"
            )
        if self.editable and self.count > 1:
            # The last approval's answer is what runs: an edit by one approver would either be
            # lost or run with fewer approvals of the edited call than the rule asks for.
            raise ApprovalRuleError(
                "Approval.editable cannot be combined with count > 1: every approver must "
                "approve the arguments that run, so edits are offered to single approvals only"
            )
        _seconds("grant_ttl", self.grant_ttl)
        if self.remind_after is not None:
            _seconds("remind_after", self.remind_after)
        if self.escalate_after is not None:
            _seconds("escalate_after", self.escalate_after)
        if (self.escalate_to or self.escalate_after is not None) and self.remind_after is None:
            raise ApprovalRuleError(
                "Approval.escalate_to needs remind_after: escalation follows an unanswered reminder"
            )
        if self.escalate_after is not None and not self.escalate_to:
            raise ApprovalRuleError("Approval.escalate_after needs escalate_to: whom to add")

    @property
    def escalation_delay(self) -> float | None:
        """Seconds from the reminder to the escalation; None when nobody is escalated to."""
        if not self.escalate_to:
            return None
        return self.escalate_after if self.escalate_after is not None else self.remind_after

    def to_json(self) -> dict[str, Any]:
        """The rule as stored in an approval's payload."""
        data = asdict(self)
        for name in _LISTS:
            data[name] = list(data[name])
        return data


_RULE = TypeAdapter(Approval)


def _seconds(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ApprovalRuleError(
            f"Approval.{name} must be a positive number of seconds, got {value!r}"
        )


def approval_of(record: InteractionRecord) -> Approval | None:
    """The rule of an approval (`Approval()` for one stored before rules existed); None for an
    interaction that is not an approval.

    Raises `CorruptRecordError` when the stored rule does not read back as one: an approval
    path must refuse then, never fall back to a laxer rule.
    """
    if not is_approval(record):
        return None
    raw = record.payload.get(RULE_KEY)
    if raw is None:
        return Approval()
    try:
        return _RULE.validate_python(raw, strict=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "rule"
        raise CorruptRecordError(
            f"interaction {record.interaction_id}", "approval rule", f"{where}: {first['msg']}"
        ) from None
