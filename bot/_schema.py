"""Server-side validation of answers against their interaction's `response_schema`, with the
validator the card uses (`state.schema_errors`), so the runtime never refuses an answer the card
accepted."""

from __future__ import annotations

import json
from typing import Any

from state import AnswerSchemaError, PendingInteraction, schema_errors
from state import check_schema as _check_schema

from ._errors import InvalidResumeValue, UsageError

__all__ = ["check_answer", "check_schema"]


def check_schema(schema: dict[str, Any] | None) -> None:
    """Fail early, at `suspend()` time, for a schema that can never validate anything."""
    try:
        _check_schema(schema)
    except AnswerSchemaError as exc:
        raise UsageError(f"response_schema is invalid: {exc}") from None


def check_answer(run_id: str, interaction: PendingInteraction, value: Any) -> Any:
    """The answer as JSON data (a tuple becomes a list), or `InvalidResumeValue`.

    The handler gets this normalized value, so it sees the same thing on this resume as on any
    later one, when the answer comes back from the store.
    """
    iid = interaction.interaction_id
    try:
        value = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise InvalidResumeValue(
            f"Answer for interaction `{iid}` must be JSON data "
            f"(no NaN or Infinity), got {type(value).__name__}",
            run_id=run_id,
            interaction_id=iid,
        ) from None
    try:
        errors = schema_errors(interaction.response_schema, value)
    except AnswerSchemaError as exc:
        raise InvalidResumeValue(
            f"Interaction `{iid}` ({interaction.kind}) cannot be answered: its response_schema "
            f"is invalid: {exc}",
            run_id=run_id,
            interaction_id=iid,
        ) from None
    if errors:
        error = errors[0]
        where = "/".join(str(p) for p in error.absolute_path)
        raise InvalidResumeValue(
            f"Answer {value!r} for interaction `{iid}` ({interaction.kind}) is invalid"
            f"{f' at `{where}`' if where else ''}: {error.message}",
            run_id=run_id,
            interaction_id=iid,
        )
    return value
