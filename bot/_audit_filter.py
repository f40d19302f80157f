"""Which audit entries `handback audit` prints: the filters of its command line, parsed from
what a person types, and matched against an entry and the interaction it is about."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import get_args

from state import AuditAction, AuditEntry, InteractionRecord, UsageError, is_approval

__all__ = ["OUTCOMES", "AuditFilter", "parse_outcomes", "parse_time", "tool_of"]

OUTCOMES: tuple[str, ...] = get_args(AuditAction)
"""Every action the audit log records, as `--outcome` takes them."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_time(option: str, text: str, *, now: float) -> float:
    """Unix seconds of `text`: a duration back from `now` (`90m`, `2h`, `7d`) or an ISO date or
    date and time (UTC unless it names its offset); `UsageError` naming `option` otherwise."""
    value = text.strip()
    duration = _DURATION.fullmatch(value)
    if duration is not None:
        return now - float(duration.group(1)) * _SECONDS[duration.group(2)]
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"`{option}` takes an ISO date or time (2026-12-01, 2026-12-01T09:30) or a duration "
            f"(30m, 2h, 7d), got {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_outcomes(values: list[str]) -> frozenset[str]:
    """The actions named by `--outcome` (repeated, or separated by commas)."""
    chosen = {part.strip() for value in values for part in value.split(",") if part.strip()}
    unknown = sorted(chosen - set(OUTCOMES))
    if unknown:
        raise UsageError(
            f"`--outcome` {unknown[0]!r} is not an audit action; one of: {', '.join(OUTCOMES)}"
        )
    return frozenset(chosen)


@dataclass(kw_only=True, frozen=True)
class AuditFilter:
    """Conditions that must all hold (AND); an unset one holds for every entry."""

    users: frozenset[str] = field(default_factory=frozenset)
    tools: frozenset[str] = field(default_factory=frozenset)
    channels: frozenset[str] = field(default_factory=frozenset)
    outcomes: frozenset[str] = field(default_factory=frozenset)
    since: float | None = None
    until: float | None = None

    @property
    def active(self) -> bool:
        return bool(
            self.users
            or self.tools
            or self.channels
            or self.outcomes
            or self.since is not None
            or self.until is not None
        )

    @property
    def needs_interaction(self) -> bool:
        """The entry alone does not say its tool or channel: its interaction does."""
        return bool(self.tools or self.channels)

    def matches(self, entry: AuditEntry, interaction: InteractionRecord | None) -> bool:
        """`interaction` is the one `entry.interaction_id` names, None when there is none or
        the store no longer keeps it; an entry without one matches no `tools` or `channels`."""
        if self.users and entry.user not in self.users:
            return False
        if self.outcomes and entry.action not in self.outcomes:
            return False
        if self.since is not None and entry.at < self.since:
            return False
        if self.until is not None and entry.at > self.until:
            return False
        if self.tools and (interaction is None or tool_of(interaction) not in self.tools):
            return False
        return not self.channels or (
            interaction is not None and interaction.channel in self.channels
        )


def tool_of(record: InteractionRecord) -> str | None:
    """The tool an approval is about; None for questions."""
    if not is_approval(record):
        return None
    tool = record.payload.get("tool")
    return tool if isinstance(tool, str) else None
