"""Recording: what Slack sent goes to the store's inbox, within Slack's deadline, before the ack.

Nothing Slack got a 200 for can then be lost: the inbox worker (`_worker.Worker`, in this
process or another) does the work.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from state import Inbox, StoreError

from .. import _metrics
from ._bounded import within

__all__ = ["RECORD_WAIT", "Recorder"]

log = logging.getLogger("handback.slack")

RECORD_WAIT: Final = 2.0
"""Seconds the ack may wait for the inbox write: Slack gives up on a response after 3."""


class Recorder:
    """Writes a listener's work to the inbox; `kick` (if any) starts it in this process at once."""

    def __init__(self, *, inbox: Inbox, kick: Callable[[], None] | None) -> None:
        self.inbox = inbox
        self.kick = kick
        """The worker's `kick`, for a bot without its loops that works its own inbox (tests)."""

    async def record(
        self,
        kind: str,
        item: dict[str, Any],
        *,
        dedupe: str | None = None,
        about: str | None = None,
    ) -> bool:
        """Write work to the inbox within Slack's deadline; False when it could not be written.

        A repeat of an event already recorded counts as written: Slack gets its 200 and stops.
        A click names the interaction it is `about`, which the store reads with the write, so
        the worker checks it without a read of its own.
        """
        started = time.perf_counter()
        try:
            item_id = await within(
                RECORD_WAIT,
                self.inbox.enqueue(
                    kind,
                    {"id": uuid.uuid4().hex, **item},
                    dedupe=dedupe,
                    about=about,
                ),
            )
        except (StoreError, TimeoutError) as error:
            log.warning("could not record a %s in the inbox: %s", kind, str(error) or "timed out")
            _metrics.STORE_ERRORS.labels(where="record").inc()
            _metrics.RECORDED.labels(kind=kind, outcome="not_recorded").inc()
            return False
        finally:
            _metrics.RECORD_SECONDS.labels(kind=kind).observe(time.perf_counter() - started)
        _metrics.RECORDED.labels(kind=kind, outcome="recorded" if item_id else "repeated").inc()
        if item_id is None:
            # Slack redelivers an event it thinks timed out; Bolt does not de-duplicate.
            log.info("ignoring a repeated delivery of %s", dedupe)
            return True
        if self.kick is not None:
            self.kick()
        return True
