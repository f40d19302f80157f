"""Which rule gates an MCP tool, and why: fail closed unless a trusted server says read-only."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from mcp_types import ToolAnnotations

from .._tool import ApprovalRule

__all__ = ["Gate", "gate_of", "matches"]


@dataclass(kw_only=True, frozen=True)
class Gate:
    """The rule an MCP tool's calls are approved under, and the reason people are shown."""

    rule: ApprovalRule
    """`False` runs without approval; anything else as `Tool.requires_approval`."""
    reason: str | None
    """Why it is gated ("destructive", "no annotations", ...); None when it is not."""
    idempotent: bool
    """Whether a call cut short by a crash may run again: read-only or idempotent by the
    annotations of a trusted server, or declared so."""


def matches(name: str, patterns: Mapping[str, object] | list[str] | tuple[str, ...]) -> str | None:
    """The first pattern (a name or a glob) that `name` matches, else None."""
    for pattern in patterns:
        if pattern == name or fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def gate_of(
    tool: str,
    annotations: ToolAnnotations | None,
    *,
    trusted: bool,
    approvals: Mapping[str, ApprovalRule],
    default: ApprovalRule,
    idempotent: list[str] | tuple[str, ...],
) -> Gate:
    """The gate of the server's tool `tool` (its own name, not the prefixed one).

    The MCP spec's defaults are pessimistic (`readOnlyHint` false, `destructiveHint` true), and
    an annotation is only a claim of the server: it decides nothing unless the server is trusted.
    """
    read_only = trusted and annotations is not None and annotations.read_only_hint is True
    declared = matches(tool, idempotent) is not None
    safe_again = read_only or (
        trusted and annotations is not None and annotations.idempotent_hint is True
    )
    reason = _reason(annotations, trusted=trusted)
    pattern = matches(tool, approvals)
    if pattern is not None:
        rule = approvals[pattern]
        gated = rule is not False
        return Gate(
            rule=rule,
            reason=(reason or "approval rule for this tool") if gated else None,
            idempotent=declared or safe_again,
        )
    if read_only:
        return Gate(rule=False, reason=None, idempotent=True)
    return Gate(rule=default, reason=reason, idempotent=declared or safe_again)


def _reason(annotations: ToolAnnotations | None, *, trusted: bool) -> str | None:
    if not trusted:
        return "server not trusted for annotations"
    if annotations is None:
        return "no annotations"
    if annotations.read_only_hint is True:
        return None
    if annotations.destructive_hint is False:
        return "not read-only"
    return "destructive"
