"""A signed Slack click over real HTTP, the same code for every Slack contender.

Needs aiohttp and slack_sdk, which both the project's venv and the bare Bolt app's have.
"""

from __future__ import annotations

import time
from types import TracebackType

import aiohttp
from slack_sdk.signature import SignatureVerifier

__all__ = ["BURST_CONNECTIONS", "SignedPoster"]

BURST_CONNECTIONS = 100
"""Connections a burst of clicks arrives over. Opened all at once, a thousand would overflow the
server's listen backlog (128 here) and wait for SYN retries (1, 3, 7 s): that measured the
kernel, and a bare Bolt app's p50 came out at 10 s. A hundred is aiohttp's default limit and the
events' limit in `tests/slack/test_durable_burst.py`."""


class SignedPoster:
    """POSTs form-encoded interactivity bodies to one endpoint, signed as Slack signs them, over
    one keep-alive session (Slack reuses connections too).

    `connections` bounds the connections open at once (0: none); a request waiting for one
    is timed from when it was made, as Slack's clock starts when it sends."""

    def __init__(self, url: str, signing_secret: str, *, connections: int = 0) -> None:
        self.url = url
        self.verifier = SignatureVerifier(signing_secret)
        self.connections = connections
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SignedPoster:
        connector = aiohttp.TCPConnector(limit=self.connections)
        self.session = aiohttp.ClientSession(connector=connector)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.session is not None:
            await self.session.close()

    async def post(self, body: str) -> int:
        """The response's status, once its body is read."""
        assert self.session is not None
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": timestamp,
            "X-Slack-Signature": self.verifier.generate_signature(timestamp=timestamp, body=body),
        }
        async with self.session.post(self.url, data=body, headers=headers) as response:
            await response.read()
            return response.status
