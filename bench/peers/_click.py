"""A signed Slack click over real HTTP, the same code for every Slack contender.

Needs aiohttp and slack_sdk, which both the project's venv and the bare Bolt app's have.
"""

from __future__ import annotations

import time
from types import TracebackType

import aiohttp
from slack_sdk.signature import SignatureVerifier

__all__ = ["SignedPoster"]


class SignedPoster:
    """POSTs form-encoded interactivity bodies to one endpoint, signed as Slack signs them, over
    one keep-alive session (Slack reuses connections too)."""

    def __init__(self, url: str, signing_secret: str) -> None:
        self.url = url
        self.verifier = SignatureVerifier(signing_secret)
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> SignedPoster:
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
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
