"""When an unanswered approval's reminder and escalation are due, as both stores compute them.

The times come from the approval's rule (`Approval.remind_after`, `escalation_delay`) and the
record's `created_at`, once, when the record is added; the stores keep them beside the record and
list what is due (`due_nudges`), and `mark_nudged` fires each at most once.
"""

from __future__ import annotations

import dataclasses
import math

from ._approval import approval_of
from ._errors import CorruptRecordError
from ._records import InteractionRecord, Nudge, NudgeKind

__all__ = ["NUDGE_KINDS", "next_nudge", "nudge_delays", "nudge_times", "unfired"]

NUDGE_KINDS: tuple[NudgeKind, ...] = ("reminder", "escalation")


def nudge_times(record: InteractionRecord) -> tuple[float | None, float | None]:
    """`(remind_at, escalate_at)` of an approval; None where its rule asks for none.

    A rule that does not read back schedules nothing: the approval path refuses every answer to
    it anyway, and a reminder would only invite clicks that fail.
    """
    delays = nudge_delays(record)
    if delays is None:
        return None, None
    remind_after, delay = delays
    remind_at = record.created_at + remind_after
    escalate_at = None if delay is None else remind_at + delay
    if not math.isfinite(remind_at) or (escalate_at is not None and not math.isfinite(escalate_at)):
        return None, None
    return remind_at, escalate_at


def nudge_delays(record: InteractionRecord) -> tuple[float, float | None] | None:
    """`(remind_after, escalation_delay)` of an approval's rule, which `nudge_times` adds to its
    `created_at`; None where its rule asks for no reminder (or does not read back). The Redis
    add script adds them itself to the `created_at` a re-added pending record keeps."""
    try:
        rule = approval_of(record)
    except CorruptRecordError:
        return None
    if rule is None or rule.remind_after is None:
        return None
    return rule.remind_after, rule.escalation_delay


def unfired(record: InteractionRecord) -> InteractionRecord:
    """The record as a store adds it: whether a nudge fired is the store's to record
    (`mark_nudged`), never the writer's, so a record read back and added again cannot carry a
    mark the store does not hold."""
    if record.reminded_at is None and record.escalated_at is None:
        return record
    return dataclasses.replace(record, reminded_at=None, escalated_at=None)


def next_nudge(
    record: InteractionRecord, remind_at: float | None, escalate_at: float | None, now: float
) -> Nudge | None:
    """What `record` is due for at `now`, given its stored times: the reminder until it fired,
    then the escalation; None when nothing is (answered, closed, expired, or not yet due)."""
    if record.status != "pending" or record.expires_at <= now:
        return None
    if record.reminded_at is None:
        if remind_at is not None and remind_at <= now:
            return Nudge(kind="reminder", due_at=remind_at, record=record)
        return None
    if record.escalated_at is None and escalate_at is not None and escalate_at <= now:
        return Nudge(kind="escalation", due_at=escalate_at, record=record)
    return None
