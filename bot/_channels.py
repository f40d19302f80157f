"""`ChannelTools`: which of an agent's tools each Slack channel is offered, a hard boundary.

In a channel the model sees only that channel's tools, and the step that runs the calls gets
only those: a call of another tool (a model that names one anyway, an approval or a standing
grant given for it) is refused like a call of a tool the agent does not have.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from ._errors import UsageError

__all__ = ["OTHER_CHANNELS", "ChannelTools", "is_channel_id"]

OTHER_CHANNELS = "*"
"""The key of the set offered in every channel not named (and to runs outside any channel)."""

_CHANNEL = re.compile(r"[CGD][A-Z0-9]{2,}")
"""A Slack conversation id: public (C), private (G, older ones) or a direct message (D)."""


def is_channel_id(channel: object) -> bool:
    return isinstance(channel, str) and _CHANNEL.fullmatch(channel) is not None


@dataclass(frozen=True, kw_only=True)
class ChannelTools:
    """Per channel id, the tools offered there: each entry names a toolset (all its tools),
    or a tool by name or glob (`repo_git_*`). A channel that is not named gets the
    `OTHER_CHANNELS` set if there is one, else no tools at all (fail closed)."""

    sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, sets: Mapping[str, Sequence[str]]) -> ChannelTools:
        checked: dict[str, tuple[str, ...]] = {}
        for channel, entries in sets.items():
            if channel != OTHER_CHANNELS and not is_channel_id(channel):
                raise UsageError(
                    f"channel {channel!r} is not a Slack channel id (C…, G…, D…) or "
                    f"{OTHER_CHANNELS!r} (every other channel)"
                )
            if isinstance(entries, str) or not all(isinstance(e, str) and e for e in entries):
                raise UsageError(
                    f"channel `{channel}`: its tools must be a list of names, got {entries!r}"
                )
            checked[channel] = tuple(entries)
        return cls(sets=checked)

    def entries(self, channel: str | None) -> tuple[str, ...]:
        """What `channel` is offered (None: a run outside any channel)."""
        if channel is not None and channel in self.sets:
            return self.sets[channel]
        return self.sets.get(OTHER_CHANNELS, ())

    def offers(self, channel: str | None, tool: str, toolset: str | None) -> bool:
        """Whether the tool named `tool` (from the toolset named `toolset`, None for an agent's
        own tool) is offered in `channel`."""
        return any(
            (toolset is not None and entry == toolset) or fnmatchcase(tool, entry)
            for entry in self.entries(channel)
        )
