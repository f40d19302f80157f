"""JSON encoding of records, and their validation when read back (a store read is untrusted).

Adapters are built once at import; `dump_json`/`validate_json` run in pydantic-core, so a run
with a long transcript costs microseconds, not milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from ._errors import CorruptRecordError
from ._records import AuditEntry, InteractionRecord, RunRecord

__all__ = [
    "INTERACTION_OVERLAY",
    "check_interaction_times",
    "check_now",
    "decode_audit",
    "decode_interaction",
    "decode_run",
    "encode_answer",
    "encode_audit",
    "encode_interaction",
    "encode_run",
    "lease_millis",
    "text",
]

_RUN = TypeAdapter(RunRecord)
_INTERACTION = TypeAdapter(InteractionRecord)
_AUDIT = TypeAdapter(AuditEntry)

INTERACTION_OVERLAY = ("status", "answer", "answered_by", "answered_at", "channel", "message_ts")
"""Fields of an interaction that change after it is added. Both stores keep them beside the JSON
as written, so a claim updates them in place (in Lua or SQL) without re-encoding the record."""

_T = TypeVar("_T")
Raw = bytes | str


def text(value: object) -> str:
    """A value the store returned as bytes or text, as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _reason(exc: Exception) -> str:
    text = str(exc).replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


def _validate(adapter: TypeAdapter[_T], data: Raw, *, key: str, kind: str) -> _T:
    try:
        return adapter.validate_json(data)
    except ValidationError as exc:
        raise CorruptRecordError(key, kind, _reason(exc)) from exc


def encode_run(run: RunRecord) -> bytes:
    return _RUN.dump_json(run)


def decode_run(data: Raw, *, key: str, run_id: str, resumed_by: Raw | None) -> RunRecord:
    """The stored run; `resumed_by` is kept apart from the JSON so a claim need not rewrite it.

    A record saved before a field existed (`root_id`, `id_scheme`, `message`, the journal's
    `started` and `results`, `nested`) gets the field's default, which is chosen to mean what
    that record meant: `id_scheme` 1, the interaction ids of its time; an empty journal.
    """
    run = _validate(_RUN, data, key=key, kind="run")
    if run.run_id != run_id:
        raise CorruptRecordError(key, "run", f"it holds run {run.run_id!r}")
    if resumed_by is not None:
        run.resumed_by = text(resumed_by)
    return run


def check_interaction_times(record: InteractionRecord) -> None:
    """Refuse a record whose times JSON cannot hold: pydantic would write NaN or infinity as
    `null`, which reads back as a corrupt record, and neither expires nor sorts sensibly."""
    for name in ("created_at", "expires_at", "answered_at"):
        value = getattr(record, name)
        if value is not None and not math.isfinite(value):
            raise ValueError(
                f"interaction `{record.interaction_id}` has a non-finite `{name}`: {value!r}"
            )


def check_now(now: float) -> None:
    """`now` compares with stored times; NaN compares with none (infinity is a valid bound)."""
    if math.isnan(now):
        raise ValueError(f"`now` must be a number of seconds, got {now!r}")


def lease_millis(owner: str, ttl: float) -> int:
    """A lease's TTL in whole milliseconds (at least one), once its owner and TTL are checked:
    an empty owner could not be told apart from no lease, and a lease must end."""
    if not owner:
        raise ValueError("`owner` must be a non-empty string")
    if not (math.isfinite(ttl) and ttl > 0):
        raise ValueError(f"`ttl` must be a positive number of seconds, got {ttl!r}")
    return max(1, math.ceil(ttl * 1000))


def encode_interaction(record: InteractionRecord) -> bytes:
    return _INTERACTION.dump_json(record)


def encode_answer(answer: Any) -> bytes:
    return pydantic_core.to_json(answer)


def decode_interaction(
    data: Raw, *, key: str, interaction_id: str, overlay: Mapping[str, object]
) -> InteractionRecord:
    """The record as added, with the fields of `INTERACTION_OVERLAY` found in `overlay` on top.

    Values in `overlay` are as the store returns them: text (or bytes) for strings, the answer
    as JSON, and `answered_at` as a number or its text.
    """
    try:
        fields = pydantic_core.from_json(data)
        if not isinstance(fields, dict):
            raise CorruptRecordError(key, "interaction", "it is not a JSON object")
        for name in INTERACTION_OVERLAY:
            value = overlay.get(name)
            if value is None:
                continue
            if name == "answer":
                fields[name] = pydantic_core.from_json(value)  # type: ignore[arg-type]
            elif name == "answered_at":
                fields[name] = float(text(value))
            else:
                fields[name] = text(value)
        record = _INTERACTION.validate_python(fields)
    except (ValidationError, ValueError) as exc:
        raise CorruptRecordError(key, "interaction", _reason(exc)) from exc
    if record.interaction_id != interaction_id:
        raise CorruptRecordError(key, "interaction", f"it holds {record.interaction_id!r}")
    return record


def encode_audit(entry: AuditEntry) -> bytes:
    return _AUDIT.dump_json(entry)


def decode_audit(data: Raw, *, key: str) -> AuditEntry:
    return _validate(_AUDIT, data, key=key, kind="audit entry")
