"""The journal's "started" mark on Redis, written from the event loop's thread with a blocking
round trip, so that the caller acts on it in the same breath as the reply arrives.

Through the pooled async client the script runs (and the mark is in Redis) at once, but its
reply waits in the socket until the loop gets to it, behind whatever else a busy loop has
queued: a process killed in that gap leaves a call marked started that never began, and its
thread is told it "may or may not have taken effect" (issue 19; the kill test of
tests/slack/test_durable_kills.py found three such calls in one batch of eight at a load of 8
on 2 cores). Here the loop waits for the reply itself, one local round trip, and `then` runs
right after it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.commands.core import Script
from redis.retry import Retry

from ._errors import StoreClosedError

__all__ = ["MarkWriter"]

_TIMEOUT = 2.0
"""Seconds the loop may wait for a mark's reply (or a connection) before the write fails: the
loop stops for that long (twice, with the retry) only when Redis does not answer."""


class MarkWriter:
    """A synchronous client of its own to the store's Redis, used only on the loop's thread.

    Opened at the first mark by `connect` (a `sync_client` built like the heartbeat's, with
    `_TIMEOUT`), closed by `close`.
    """

    def __init__(self, connect: Callable[[float], redis.Redis]) -> None:
        self._connect = connect
        self._client: redis.Redis | None = None
        self._scripts: dict[str, Script] = {}
        self._closed = False

    def run(self, source: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """One script, its reply read before this returns; redis-py's errors propagate."""
        script = self._scripts.get(source)
        if script is None:
            script = self._scripts[source] = self._open().register_script(source)
        return script(keys=keys, args=args)

    def close(self) -> None:
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _open(self) -> redis.Redis:
        if self._closed:
            raise StoreClosedError("the Redis store is closed")
        if self._client is None:
            client = self._connect(_TIMEOUT)
            # One retry, at once: after a Redis restart the connection is dead and the retry
            # reconnects. redis-py's default (three, with backoff) would stop the loop for
            # several timeouts while Redis does not answer.
            client.set_retry(Retry(NoBackoff(), 1))
            self._client = client
        return self._client
