"""`ChannelRules`: the approval rule a tool has in one Slack channel, over the tool's own.

In #prod `deploy` may need two approvers from the leads and in #staging one: a channel's table
names tools (by name or glob, as the model sees them) and the rule each has there. The gate of a
run in that channel uses it; a channel that is not named gets the `OTHER_CHANNELS` table if
there is one, else every tool keeps its own rule (fail closed: never no rule because a channel
was not foreseen).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from state import Approval

from ._channels import OTHER_CHANNELS, is_channel_id
from ._errors import UsageError
from ._tool import ApprovalRule, Tool

__all__ = ["ChannelRules"]


@dataclass(frozen=True, kw_only=True)
class ChannelRules:
    """Per channel id (or `OTHER_CHANNELS`), tool name or glob -> the rule there, in the order
    given: an exact name wins over a glob, else the first glob that matches."""

    rules: Mapping[str, tuple[tuple[str, ApprovalRule], ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, rules: Mapping[str, Mapping[str, ApprovalRule]]) -> ChannelRules:
        checked: dict[str, tuple[tuple[str, ApprovalRule], ...]] = {}
        for channel, table in rules.items():
            if channel != OTHER_CHANNELS and not is_channel_id(channel):
                raise UsageError(
                    f"channel {channel!r} is not a Slack channel id (C…, G…, D…) or "
                    f"{OTHER_CHANNELS!r} (every other channel)"
                )
            if not isinstance(table, Mapping):
                raise UsageError(
                    f"channel `{channel}`: its rules must map tool names to rules, got {table!r}"
                )
            for tool, rule in table.items():
                if not isinstance(tool, str) or not tool:
                    raise UsageError(f"channel `{channel}`: {tool!r} is not a tool name")
                if not isinstance(rule, bool | Approval) and not callable(rule):
                    raise UsageError(
                        f"channel `{channel}`, tool `{tool}`: a rule is a bool, an Approval or "
                        f"a policy over the tool's arguments, got {rule!r}"
                    )
            checked[channel] = tuple(table.items())
        return cls(rules=checked)

    def rule(self, channel: str | None, tool: str) -> tuple[bool, ApprovalRule]:
        """(True, the rule) when `channel` overrides the rule of the tool named `tool`, else
        (False, False): the tool's own rule stands."""
        table = self.rules.get(channel) if channel is not None else None
        if table is None:
            table = self.rules.get(OTHER_CHANNELS, ())
        for pattern, rule in table:
            if pattern == tool:
                return True, rule
        for pattern, rule in table:
            if fnmatchcase(tool, pattern):
                return True, rule
        return False, False

    def apply(self, channel: str | None, tools: Mapping[str, Tool]) -> dict[str, Tool]:
        """`tools` as they are in `channel`: a tool the channel has a rule for is a copy that
        asks for that rule (the agent's own tool is never changed)."""
        applied: dict[str, Tool] = {}
        for name, tool in tools.items():
            found, rule = self.rule(channel, name)
            if found and rule is not tool.requires_approval:
                tool = copy.copy(tool)
                tool.requires_approval = rule
                tool.channel_rule = True
            applied[name] = tool
        return applied
