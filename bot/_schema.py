"""Server-side validation of answers against their interaction's `response_schema`."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import FormatChecker
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from state import PendingInteraction

from ._errors import InvalidResumeValue, UsageError

__all__ = ["check_answer", "check_schema"]

_formats = FormatChecker()


@lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator:
    schema = json.loads(schema_json)
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise UsageError(f"response_schema is not a valid JSON Schema: {exc.message}") from None
    return cls(schema, format_checker=_formats)


def check_schema(schema: dict[str, Any] | None) -> None:
    """Fail early, at `suspend()` time, for a schema that can never validate anything."""
    if schema is not None:
        _validator(json.dumps(schema, sort_keys=True))


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
    if interaction.response_schema is None:
        return value
    validator = _validator(json.dumps(interaction.response_schema, sort_keys=True))
    error = next(iter(validator.iter_errors(value)), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise InvalidResumeValue(
            f"Answer {value!r} for interaction `{iid}` ({interaction.kind}) is invalid"
            f"{f' at `{where}`' if where else ''}: {error.message}",
            run_id=run_id,
            interaction_id=iid,
        )
    return value
