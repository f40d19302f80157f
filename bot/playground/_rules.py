"""The workspace rules LocalSlack's Web API applies before a method runs: the scope each method
needs (Slack answers `missing_scope` with `needed` and `provided`), trigger ids that expire, and
per-method rate limits by Slack's tiers (a profile a test turns on).

Scopes and tiers are those each method's page on docs.slack.dev/reference/methods gives.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "HISTORY_SCOPES",
    "METHOD_SCOPES",
    "METHOD_TIERS",
    "POST_PER_CHANNEL_SECONDS",
    "TIER_PER_MINUTE",
    "TRIGGER_SECONDS",
    "RateLimits",
]

METHOD_SCOPES: Final[dict[str, str]] = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "chat.delete": "chat:write",
    "chat.startStream": "chat:write",
    "chat.appendStream": "chat:write",
    "chat.stopStream": "chat:write",
    "agents.sessions.setStatus": "assistant:write",
    "agents.sessions.rename": "assistant:write",
    "reactions.add": "reactions:write",
    "reactions.remove": "reactions:write",
    "usergroups.users.list": "usergroups:read",
    "users.info": "users:read",
}
"""The bot scope each method needs (views.*, auth.test need none); conversations.replies needs
the history scope of the conversation's kind (`HISTORY_SCOPES`)."""

HISTORY_SCOPES: Final[dict[str, str]] = {
    "channel": "channels:history",
    "im": "im:history",
    "mpim": "mpim:history",
}

TRIGGER_SECONDS: Final = 3.0
"""How long a trigger id may be exchanged (docs.slack.dev, 'Handling user interaction': 'a
trigger_id ... will expire 3 seconds after it is sent to your app')."""

TIER_PER_MINUTE: Final[dict[int, int]] = {1: 1, 2: 20, 3: 50, 4: 100}
"""Calls a minute per method tier (docs.slack.dev/apis/web-api/rate-limits: Tier 1 1+, Tier 2
20+, Tier 3 50+, Tier 4 100+ per minute); the profile allows exactly the figure."""

METHOD_TIERS: Final[dict[str, int]] = {
    "chat.update": 3,
    "chat.delete": 3,
    "chat.postEphemeral": 4,
    "chat.startStream": 2,
    "chat.appendStream": 4,
    "chat.stopStream": 2,
    "views.open": 4,
    "views.update": 4,
    "views.publish": 4,
    "reactions.add": 3,
    "reactions.remove": 2,
    "conversations.replies": 3,
    "conversations.info": 3,
    "conversations.members": 4,
    "usergroups.users.list": 2,
    "users.info": 4,
}
"""Each method's tier as its docs.slack.dev page gives it, confirmed against slack_sdk for
Java's table (slackapi/java-slack-sdk slack-api-client/.../methods/MethodsRateLimits.java:
chat.startStream and chat.stopStream Tier 2, chat.appendStream Tier 4, conversations.info
Tier 3, conversations.members Tier 4; docs.slack.dev's chat.appendStream page: Tier 4);
chat.postMessage is 'special' (about one message a
second per channel, `POST_PER_CHANNEL_SECONDS`)."""

POST_PER_CHANNEL_SECONDS: Final = 1.0


@dataclass(kw_only=True)
class RateLimits:
    """Per-method call windows of one workspace's app: off until a test turns the profile on."""

    on: bool = False
    _calls: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, method: str, channel: str | None, now: float) -> int | None:
        """None when the call may go ahead (and is counted); else the seconds to wait."""
        if not self.on:
            return None
        if method == "chat.postMessage":
            key, window, most = f"{method}:{channel}", POST_PER_CHANNEL_SECONDS, 1
        elif method in METHOD_TIERS:
            key, window, most = method, 60.0, TIER_PER_MINUTE[METHOD_TIERS[method]]
        else:
            return None
        calls = self._calls.setdefault(key, deque())
        while calls and now - calls[0] >= window:
            calls.popleft()
        if len(calls) >= most:
            return max(1, int(window - (now - calls[0]) + 0.999))
        calls.append(now)
        return None
