"""Answering through a payload's `response_url`, and only when that URL is at Slack.

A slash command's or a click's `response_url` reaches that person alone and works where the
bot cannot post (a channel it is not in); the URL came in a payload, so the bot sends nothing
to a host that is not Slack's (or the Web API host it is configured with, such as LocalSlack).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from yarl import URL

__all__ = ["post_response"]

log = logging.getLogger("handback.slack")

_RESPOND_SECONDS = 10.0
_SLACK_HOSTS = frozenset({"hooks.slack.com", "hooks.slack-gov.com"})


async def post_response(response_url: str, body: dict[str, Any], *, api_url: str) -> bool:
    """POST `body` to `response_url`; False (and one log line) when the URL is not at Slack or
    Slack did not answer 200."""
    if not _slack_url(response_url, api_url):
        log.warning("refused to answer through a response_url not at Slack")
        return False
    try:
        timeout = aiohttp.ClientTimeout(total=_RESPOND_SECONDS)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(response_url, json=body) as response,
        ):
            if response.status == 200:
                return True
            log.warning("slack response_url answered %s", response.status)
    except (aiohttp.ClientError, TimeoutError) as error:
        log.warning("slack response_url failed: %r", error)
    return False


def _slack_url(url: str, api_url: str) -> bool:
    """Whether `url` is at Slack: https on one of its hooks hosts, or on the configured Web API's
    own scheme, host and port."""
    try:
        found, api = URL(url), URL(api_url)
    except (ValueError, TypeError):
        return False
    if found.scheme == "https" and found.host in _SLACK_HOSTS and found.user is None:
        return found.explicit_port is None
    return (found.scheme, found.host, found.port) == (api.scheme, api.host, api.port) and (
        found.user is None and found.host is not None
    )
