"""JSON encoding of records, and their validation when read back (a store read is untrusted).

Adapters are built once at import; `dump_json`/`validate_json` run in pydantic-core, so a run
with a long transcript costs microseconds, not milliseconds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pydantic_core
from pydantic import TypeAdapter, ValidationError

from ._approval_answer import approves
from ._errors import CorruptRecordError, UsageError
from ._records import AuditEntry, InteractionRecord, RunRecord, ThreadStop, Vote

__all__ = [
    "INTERACTION_OVERLAY",
    "approves",
    "check_interaction_times",
    "check_now",
    "decode_audit",
    "decode_interaction",
    "decode_run",
    "decode_stop",
    "encode_answer",
    "encode_audit",
    "encode_interaction",
    "encode_run",
    "encode_stop",
    "encode_vote",
    "inline",
    "is_layout2",
    "layout2_log",
    "lease_millis",
    "own_messages",
    "stop_mark",
    "stopped_since",
    "text",
    "vote_audits",
]

_RUN = TypeAdapter(RunRecord)
_INTERACTION = TypeAdapter(InteractionRecord)
_AUDIT = TypeAdapter(AuditEntry)
_STOP = TypeAdapter(ThreadStop)
_VOTE = TypeAdapter(Vote)

INTERACTION_OVERLAY = (
    "status",
    "answer",
    "answered_by",
    "answered_at",
    "channel",
    "message_ts",
    "votes",
    "reminded_at",
    "escalated_at",
)
"""Fields of an interaction that change after it is added. Both stores keep them beside the JSON
as written, so a claim updates them in place (in Lua or SQL) without re-encoding the record.
`answer` and `votes` are JSON; `votes` a list of `encode_vote` values that only ever grows."""

_JSON_OVERLAY = frozenset({"answer", "votes"})

_TIMES = frozenset({"answered_at", "reminded_at", "escalated_at"})
"""Overlay fields that are Unix seconds (a number, or its text on Redis)."""

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


_NOT_STORED = {"transcript_read"}
"""Fields of `RunRecord` that describe the value in memory, not the run."""

# A layout-2 record leaves out what the store keeps elsewhere or can rebuild: its id (the key),
# its transcript (the log), fields at their default, `input` and `output` when they are the text
# of its own first user message and of its last (assistant) message, `root_id` when it names the
# log, `id_scheme` when it is 2 (scheme 1 predates layout 2: only a resume of an old run has
# it), and `t1` as milliseconds after `t0`. What is left is about 200 bytes, so a thread's
# records grow with its turns, not with its text.
_BESIDE = {
    "run_id",
    "transcript",
    "resumed_by",
    "layout",
    "transcript_id",
    "base",
    "root_id",
    "id_scheme",
    "input",
    "output",
    "t1",
}
_LAYOUT2_HEAD = b'{"layout":2,'
"""Every layout-2 record starts so: the Redis load script reads the log only for those."""


def encode_run(run: RunRecord, *, log: str | int | None = None, status: bool = True) -> bytes:
    """The run's JSON: layout 1 with the whole transcript, layout 2 without it (the messages
    go to the transcript log: `own_messages`).

    For layout 2 a store may name the log its own way (`log`, e.g. SQLite's row id; the name
    then comes back through `decode_run(log_name=...)`) and keep `status` beside the JSON.
    """
    if run.layout == 1:
        return _RUN.dump_json(run, exclude=_NOT_STORED)
    _check_layout2(run)
    head = {
        "layout": 2,
        "log": run.transcript_id if log is None else log,
        "length": len(run.transcript),
    }
    exclude = _BESIDE | _NOT_STORED if status else _BESIDE | _NOT_STORED | {"status"}
    fields = _RUN.dump_python(run, mode="json", exclude=exclude, exclude_defaults=True)
    if run.root_id != run.transcript_id:
        fields["root_id"] = run.root_id
    if run.id_scheme != 2:
        fields["id_scheme"] = run.id_scheme
    if run.t1 is not None:
        fields["t1"] = run.t1 - run.t0
    for name, source in (("input", _input_source(run)), ("output", _output_source(run))):
        value = getattr(run, name)
        if value != (None if source is None else source.get("content")):
            fields[name] = pydantic_core.to_jsonable_python(value)
    if run.base:
        fields["base"] = run.base
    return pydantic_core.to_json({**head, **fields})


def _check_layout2(run: RunRecord) -> None:
    if not run.transcript_read:
        raise UsageError(f"run `{run.run_id}` was read without its transcript; load it to save it")
    if run.layout != 2 or not run.transcript_id:
        raise UsageError(
            f"run `{run.run_id}`: layout {run.layout!r} with transcript log {run.transcript_id!r}"
        )
    if not 0 <= run.base <= len(run.transcript):
        raise UsageError(
            f"run `{run.run_id}`: base {run.base} is outside its {len(run.transcript)} messages"
        )


def own_messages(run: RunRecord) -> list[bytes]:
    """The layout-2 run's own messages (`transcript[base:]`), one JSON value each, as the log
    keeps them: the same message always encodes to the same bytes, which is how a save tells its
    own earlier append from another run's."""
    return [pydantic_core.to_json(message) for message in run.transcript[run.base :]]


def inline(run: RunRecord) -> None:
    """Make `run` a layout-1 run (its transcript inside its record): what a store saves when
    the log holds other messages where this run's belong. Its children start a log of their
    own, so the fallback never grows a thread quadratically."""
    run.layout, run.transcript_id, run.base = 1, None, 0


def _input_source(run: RunRecord) -> dict[str, Any] | None:
    return next((m for m in run.transcript[run.base :] if m.get("role") == "user"), None)


def _output_source(run: RunRecord) -> dict[str, Any] | None:
    last = run.transcript[-1] if len(run.transcript) > run.base else None
    return last if last is not None and last.get("role") == "assistant" else None


def is_layout2(data: Raw) -> bool:
    head = data[: len(_LAYOUT2_HEAD)]
    return (head.encode() if isinstance(head, str) else head) == _LAYOUT2_HEAD


def layout2_log(data: Raw, *, key: str) -> tuple[str | int, int]:
    """The transcript log and length a layout-2 record names."""
    fields = _fields(data, key=key)
    log, length = fields.get("log"), fields.get("length")
    if not isinstance(log, str | int) or not isinstance(length, int) or length < 0:
        raise CorruptRecordError(key, "run", "its transcript log or length is missing")
    return log, length


def _fields(data: Raw, *, key: str) -> dict[str, Any]:
    try:
        fields = pydantic_core.from_json(data)
    except ValueError as exc:
        raise CorruptRecordError(key, "run", _reason(exc)) from exc
    if not isinstance(fields, dict):
        raise CorruptRecordError(key, "run", "it is not a JSON object")
    return fields


def _messages(chunks: Sequence[Raw], length: int, *, key: str, log: object) -> list[Any]:
    """The first `length` messages of a log's chunks (each the messages one save appended,
    joined by newlines, which compact JSON never holds)."""
    joined = b",".join(
        (chunk if isinstance(chunk, bytes) else chunk.encode()).replace(b"\n", b",")
        for chunk in chunks
    )
    try:
        messages: list[Any] = pydantic_core.from_json(b"[" + joined + b"]")
    except ValueError as exc:
        raise CorruptRecordError(key, "run", _reason(exc)) from exc
    if len(messages) < length:
        raise CorruptRecordError(
            key, "run", f"its transcript log `{log}` holds {len(messages)} of {length} messages"
        )
    del messages[length:]
    if not all(isinstance(message, dict) for message in messages):
        raise CorruptRecordError(key, "run", "its transcript holds a message that is no object")
    return messages


def decode_run(
    data: Raw,
    *,
    key: str,
    run_id: str,
    resumed_by: Raw | None,
    transcript: Sequence[Raw] | None = None,
    status: Raw | None = None,
    log_name: str | None = None,
) -> RunRecord:
    """The stored run; `resumed_by` is kept apart from the JSON so a claim need not rewrite it.

    A record saved before a field existed (`root_id`, `id_scheme`, `message`, the journal's
    `started` and `results`, `nested`, `layout`) gets the field's default, which is chosen to
    mean what that record meant: `id_scheme` 1, the interaction ids of its time; an empty
    journal; layout 1, the transcript inside. A layout-2 record takes its messages from
    `transcript` (the first `length` of its log; `log_name` names the log when the store wrote
    its own reference, and `status` is the one kept beside the JSON); without them (a claim)
    the run comes back with
    `transcript_read` False.
    """
    if is_layout2(data):
        run = _decode_layout2(
            data, key=key, run_id=run_id, transcript=transcript, status=status, log_name=log_name
        )
    else:
        run = _validate(_RUN, data, key=key, kind="run")
        if run.run_id != run_id:
            raise CorruptRecordError(key, "run", f"it holds run {run.run_id!r}")
    if resumed_by is not None:
        run.resumed_by = text(resumed_by)
    return run


def _decode_layout2(
    data: Raw,
    *,
    key: str,
    run_id: str,
    transcript: Sequence[Raw] | None,
    status: Raw | None,
    log_name: str | None,
) -> RunRecord:
    fields = _fields(data, key=key)
    log, length = layout2_log(data, key=key)
    del fields["log"], fields["length"]
    if log_name is not None:
        log = log_name
    if not isinstance(log, str) and transcript is not None:
        raise CorruptRecordError(key, "run", f"its transcript log {log!r} has no name")
    messages = [] if transcript is None else _messages(transcript, length, key=key, log=log)
    if status is not None:
        fields["status"] = text(status)
    if isinstance(fields.get("t1"), int) and isinstance(fields.get("t0", 0), int):
        fields["t1"] += fields.get("t0", 0)
    # A claim reads the record alone: a log the store names by number stays unnamed there, and
    # so does the root when it is that log (the caller of a claim needs neither).
    name = log if isinstance(log, str) else None
    fields.setdefault("root_id", name)
    fields.setdefault("id_scheme", 2)
    absent = {"input", "output"} - set(fields)
    fields.update(
        run_id=run_id, transcript=[], transcript_id=name, transcript_read=transcript is not None
    )
    try:
        run = _RUN.validate_python(fields)
    except ValidationError as exc:
        raise CorruptRecordError(key, "run", _reason(exc)) from exc
    # Parsed as one JSON array and checked by hand: validating each message again would cost
    # more than reading them.
    run.transcript = messages
    if run.transcript_read:
        # Left out because they were the text of these messages (see `encode_run`).
        if "input" in absent and (source := _input_source(run)) is not None:
            run.input = source.get("content")
        if "output" in absent and (source := _output_source(run)) is not None:
            run.output = source.get("content")
    return run


def check_interaction_times(record: InteractionRecord) -> None:
    """Refuse a record whose times JSON cannot hold: pydantic would write NaN or infinity as
    `null`, which reads back as a corrupt record, and neither expires nor sorts sensibly."""
    for name in ("created_at", "expires_at", "answered_at"):
        value = getattr(record, name)
        if value is not None and not math.isfinite(value):
            raise UsageError(
                f"interaction `{record.interaction_id}` has a non-finite `{name}`: {value!r}"
            )


def check_now(now: float) -> None:
    """`now` compares with stored times; NaN compares with none (infinity is a valid bound)."""
    if math.isnan(now):
        raise UsageError(f"`now` must be a number of seconds, got {now!r}")


def lease_millis(owner: str, ttl: float) -> int:
    """A lease's TTL in whole milliseconds (at least one), once its owner and TTL are checked:
    an empty owner could not be told apart from no lease, and a lease must end."""
    if not owner:
        raise UsageError("`owner` must be a non-empty string")
    if not (math.isfinite(ttl) and ttl > 0):
        raise UsageError(f"`ttl` must be a positive number of seconds, got {ttl!r}")
    return max(1, math.ceil(ttl * 1000))


def encode_interaction(record: InteractionRecord) -> bytes:
    """The record's JSON as added, without the fields at their default (they read back as
    they were): a new record's status, answer, votes and nudge times spelled out took about
    130 bytes, more than the interaction's `runnable_*` and `t0` add. What changes later is
    kept beside it (`INTERACTION_OVERLAY`); the Redis answer script reads `kind` and `payload`
    from it, which have no default."""
    return _INTERACTION.dump_json(record, exclude_defaults=True)


def encode_answer(answer: Any) -> bytes:
    return pydantic_core.to_json(answer)


def vote_audits(
    audit: AuditEntry | Sequence[AuditEntry], *, needed: int, answer: Any
) -> list[AuditEntry]:
    """The audit entries of `answer_and_claim`, one per vote (the last for the answer), once
    its arguments are checked: several votes need an object answer to add the voters to."""
    if isinstance(needed, bool) or not isinstance(needed, int) or needed < 1:
        raise UsageError(f"`needed` must be a positive whole number, got {needed!r}")
    entries = [audit] if isinstance(audit, AuditEntry) else list(audit)
    if len(entries) != needed:
        raise UsageError(f"{needed} votes need {needed} audit entries, got {len(entries)}")
    if needed > 1 and (not isinstance(answer, dict) or "approvers" in answer):
        raise UsageError(f"a vote's answer must be an object without `approvers`, got {answer!r}")
    return entries


def encode_vote(vote: Vote) -> bytes:
    """One vote as the `votes` overlay keeps it: a compact JSON object, which a Redis script
    appends to the stored list as text (re-encoding it in Lua would round `at`)."""
    return _VOTE.dump_json(vote)


def decode_interaction(
    data: Raw, *, key: str, interaction_id: str, overlay: Mapping[str, object]
) -> InteractionRecord:
    """The record as added, with the fields of `INTERACTION_OVERLAY` found in `overlay` on top.

    A field the JSON lacks gets its default: left out because it was the default
    (`encode_interaction`), or written before the field existed (the interaction's
    `runnable_*` and `t0`, `requesters`, `votes`, the nudge times), when the default means
    what that record meant.

    Values in `overlay` are as the store returns them: text (or bytes) for strings, the answer
    as JSON, and the times (`answered_at`, `reminded_at`, `escalated_at`) as a number or its
    text.
    """
    try:
        fields = pydantic_core.from_json(data)
        if not isinstance(fields, dict):
            raise CorruptRecordError(key, "interaction", "it is not a JSON object")
        for name in INTERACTION_OVERLAY:
            value = overlay.get(name)
            if value is None:
                continue
            if name in _JSON_OVERLAY:
                fields[name] = pydantic_core.from_json(value)  # type: ignore[arg-type]
            elif name in _TIMES:
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


def encode_stop(stop: ThreadStop) -> bytes:
    return _STOP.dump_json(stop)


def stop_mark(stop: ThreadStop | None) -> str | None:
    """A stop mark as the stores keep it (`encode_stop`), for `RunRecord.stop_seen`: the claims
    compare the kept mark with it byte for byte, so no clock is read to tell two stops apart."""
    return None if stop is None else encode_stop(stop).decode()


def stopped_since(rec: Raw, mark: Raw | None) -> bool:
    """Whether the run stored as `rec` had its turn stopped: the thread keeps a mark (`mark`)
    other than the one the turn began under. A run without a thread is never stopped so."""
    if mark is None:
        return False
    try:
        fields = json.loads(rec)
    except ValueError:
        return True  # Fails closed: a run that does not read is not claimed for a resume.
    if not isinstance(fields, dict) or fields.get("thread") is None:
        return False
    return bool(fields.get("stop_seen") != text(mark))


def decode_stop(data: Raw, *, key: str) -> ThreadStop:
    return _validate(_STOP, data, key=key, kind="thread stop")
