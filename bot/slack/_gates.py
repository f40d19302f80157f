"""Which approver rule each gated tool of an agent has, and the start-up check that refuses to
serve a gate nobody can open or anyone could.

A tool's approvers come from its `Approval(approvers=...)`, else `HANDBACK_TOOL_APPROVERS`,
else `HANDBACK_APPROVERS`. With none of them the gate is shut: `handback run` and `handback dev`
refuse to start naming what to set, and a click on such a request is refused (`AnswerPolicy`).
"Anyone in the channel but the requester" is a choice that has to be said:
`HANDBACK_APPROVERS=anyone`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from blocks import ANYONE

from .. import Agent, Approval, Tool
from .._nested import AgentTool
from ._settings import ConfigError, Settings

__all__ = ["GateRule", "check_gates", "gate_rules", "unknown_tool_names"]


@dataclass(frozen=True, kw_only=True)
class GateRule:
    """Who may approve the calls of one gated tool, and where that was said."""

    tool: str
    """The tool's name, as an approval's payload names it."""
    approvers: tuple[str, ...]
    """User and user-group ids, or `(ANYONE,)`; empty: nobody (the gate is shut)."""
    source: str
    """Where the list comes from, in words: "the tool's Approval", a variable, or "nowhere"."""
    fixed: Approval | None
    """The tool's own rule; None for a policy, which picks a rule per call."""
    gated_because: str | None = None
    """Why a tool of a server (MCP) is gated ("destructive", ...), as its card says."""

    @property
    def anyone(self) -> bool:
        return self.approvers == (ANYONE,)


def _gated(tools: Iterable[Tool]) -> Iterator[Tool]:
    """Every tool that can ask for approval, nested agents' tools included."""
    for tool in tools:
        if tool.requires_approval is not False:
            yield tool
        if isinstance(tool, AgentTool):
            yield from _gated(tool.agent.tools.values())


def _channel_tools(agent: Agent) -> Iterator[Tool]:
    """The tools whose rule a channel changes (`Agent.channel_rules`), as they are there."""
    if agent.channel_rules is None:
        return
    own = agent.tools
    for channel in agent.channel_rules.rules:
        for name, tool in agent.tools_in(channel).items():
            if tool is not own.get(name):
                yield tool


def gate_rules(
    agent: Agent, settings: Settings, tools: Iterable[Tool] | None = None
) -> list[GateRule]:
    """The approver rule of each gated tool of `agent` (or of `tools`, e.g. those offered in
    one channel, with its rules), as the Slack app will apply it."""
    rules = []
    for tool in _gated(agent.tools.values() if tools is None else tools):
        rule = tool.requires_approval
        fixed = rule if isinstance(rule, Approval) else Approval() if rule is True else None
        if fixed is not None and fixed.approvers:
            approvers, source = tuple(fixed.approvers), "the tool's Approval"
        elif tool.name in settings.handback_tool_approvers:
            approvers = tuple(settings.handback_tool_approvers[tool.name])
            source = "HANDBACK_TOOL_APPROVERS"
        elif settings.handback_approvers:
            approvers, source = tuple(settings.handback_approvers), "HANDBACK_APPROVERS"
        else:
            approvers, source = (), "nowhere"
        gated = tool.approval_context().get("gated_because")
        rules.append(
            GateRule(
                tool=tool.name,
                approvers=approvers,
                source=source,
                fixed=fixed,
                gated_because=str(gated) if gated else None,
            )
        )
    return rules


def check_gates(agent: Agent, settings: Settings) -> None:
    """`ConfigError` (one line) for a gated tool that nobody may approve, or a per-tool setting
    that names a tool the agent does not have (a typo would otherwise leave the real tool to
    the general list, silently)."""
    # A channel's own rule for a tool must be one someone can give too.
    rules = gate_rules(agent, settings) + gate_rules(agent, settings, _channel_tools(agent))
    for tool in unknown_tool_names(agent, settings):
        names = sorted({tool.name for tool in _all_tools(agent)})
        raise ConfigError(
            f"HANDBACK_TOOL_APPROVERS names `{tool}`, but agent `{agent.name}` has no tool of "
            f"that name (its tools: {', '.join(names) or 'none'})"
        )
    shut = [rule.tool for rule in rules if not rule.approvers]
    if shut:
        raise ConfigError(
            f"nobody may approve {', '.join(f'`{name}`' for name in shut)}: set "
            "HANDBACK_APPROVERS (user or user-group ids), HANDBACK_TOOL_APPROVERS for the tool, "
            "or Approval(approvers=[...]) on it; HANDBACK_APPROVERS=anyone lets anyone in the "
            "channel but the requester approve"
        )


def unknown_tool_names(agent: Agent, settings: Settings) -> list[str]:
    """The tool names in `HANDBACK_TOOL_APPROVERS` that no tool of `agent` has."""
    names = {tool.name for tool in _all_tools(agent)}
    return sorted(tool for tool in settings.handback_tool_approvers if tool not in names)


def _all_tools(agent: Agent) -> Iterator[Tool]:
    for tool in agent.tools.values():
        yield tool
        if isinstance(tool, AgentTool):
            yield from _all_tools(tool.agent)
