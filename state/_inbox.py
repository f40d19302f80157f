"""The inbox's value (`WorkItem`) and what both stores share about it: argument checks and the
JSON of an item's body (a store read is untrusted, so a body that does not decode is corrupt)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import CorruptRecordError, UsageError
from ._records import InteractionRecord

__all__ = [
    "WorkItem",
    "check_consumer",
    "check_dedupe",
    "check_item_ids",
    "check_take",
    "decode_body",
    "encode_body",
    "lease_seconds",
    "millis",
]


@dataclass(kw_only=True)
class WorkItem:
    """Work accepted from Slack (an event, a click, a modal submission), leased to one consumer
    at a time until it is done."""

    item_id: str
    """Assigned by the store on enqueue: the stream entry id on Redis, the row number on SQLite."""
    kind: str
    """What the body is (`event`, `action`, `view`, or anything the caller uses)."""
    body: dict[str, Any]
    """JSON data, as enqueued (the Slack payload)."""
    attempts: int
    """How many times it has been handed out, 1 on the first take."""
    enqueued_at: float
    """Unix seconds (Redis: the server clock, from the entry id; SQLite: the enqueuer's)."""
    about: str | None = None
    """The interaction the item is about (`enqueue(about=...)`), when it came with it: None too
    when the store could not read what it holds (a corrupt record: the worker reads it itself)."""
    interaction: InteractionRecord | None = None
    """That interaction, read by the store in the same step as it wrote or took the item (Redis:
    with the enqueue; SQLite: with the take), so its worker need not read it again: as stored no
    earlier than the item was added and no later than it was taken. None without `about`, or
    when the store had no such interaction then. Only a claim tells what it is now."""


def encode_body(body: dict[str, Any]) -> str:
    """Compact JSON; anything that is not JSON data is refused now rather than stored mangled.

    ASCII with escapes, so a lone surrogate from a hostile payload (valid JSON, not UTF-8)
    round-trips instead of failing to encode for the store.
    """
    if not isinstance(body, dict):
        raise UsageError(f"`body` must be a dict of JSON data, got {type(body).__name__}")
    try:
        return json.dumps(body, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"`body` must be JSON data: {exc}") from exc


def decode_body(data: str | bytes, *, key: str) -> dict[str, Any]:
    """The stdlib's parser: pydantic-core refuses the escaped lone surrogates `encode_body`
    may write."""
    try:
        body = json.loads(data)
    except ValueError as exc:
        raise CorruptRecordError(key, "work item", f"its body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise CorruptRecordError(key, "work item", "its body is not a JSON object")
    return body


def check_dedupe(kind: str, dedupe: str | None, about: str | None = None) -> None:
    if not isinstance(kind, str):
        raise UsageError(f"`kind` must be a string, got {kind!r}")
    if dedupe is not None and (not isinstance(dedupe, str) or not dedupe):
        raise UsageError(f"`dedupe` must be a non-empty string or None, got {dedupe!r}")
    if about is not None and (not isinstance(about, str) or not about):
        raise UsageError(f"`about` must be an interaction id or None, got {about!r}")


def lease_seconds(lease: float) -> float:
    if not (isinstance(lease, int | float) and math.isfinite(lease) and lease > 0):
        raise UsageError(f"`lease` must be a positive number of seconds, got {lease!r}")
    return float(lease)


def check_consumer(consumer: str) -> None:
    """A consumer must be named: an empty one could not be told from no owner."""
    if not isinstance(consumer, str) or not consumer:
        raise UsageError(f"`consumer` must be a non-empty string, got {consumer!r}")


def check_take(consumer: str, count: int, lease: float, block: float) -> None:
    """The numbers must be ones a batch, a lease or a wait can have."""
    check_consumer(consumer)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UsageError(f"`count` must be a whole number of items of at least 1, got {count!r}")
    lease_seconds(lease)
    if not (isinstance(block, int | float) and math.isfinite(block) and block >= 0):
        raise UsageError(f"`block` must be zero or a positive number of seconds, got {block!r}")


def millis(seconds: float) -> int:
    """Seconds (a lease or a wait) in whole milliseconds, at least one: a BLOCK of 0 would mean
    "forever" to Redis."""
    return max(1, math.ceil(seconds * 1000))


def check_item_ids(item_ids: Sequence[str], *, valid: Callable[[str], bool], store: str) -> None:
    """Every id must be one this kind of store assigns (`valid(id)`): another store's id (or a
    typo) is a mistake of the caller, not an item that happens to be gone."""
    if isinstance(item_ids, str):
        raise UsageError("`item_ids` must be a sequence of ids, not one string")
    for item_id in item_ids:
        if not (isinstance(item_id, str) and valid(item_id)):
            raise UsageError(f"{item_id!r} is not an item id of the {store} inbox")
