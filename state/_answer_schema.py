"""An answer's JSON Schema: the one validator the card (`blocks`) and the runtime (`bot`) share.

A question's `response_schema` is checked twice: when a person answers (the card or the modal
refuses a bad value with a message) and again when the run resumes (the runtime refuses a value
that does not fit). Two validators with different format checkers once disagreed, and a run was
cancelled for an answer its card had accepted. Both now ask this module, so an answer the card
takes is an answer the runtime takes.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from datetime import datetime
from typing import Any

import jsonschema
from jsonschema import Draft7Validator, Draft201909Validator, Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing.exceptions import Unresolvable
from rfc3986_validator import validate_rfc3986

from ._errors import UsageError

__all__ = ["AnswerSchemaError", "check_schema", "schema_errors"]

_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


class AnswerSchemaError(UsageError):
    """A `response_schema` that cannot validate anything: not a JSON Schema, or a `$ref` that
    points nowhere (remote references are never fetched)."""


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value.upper())
    except ValueError:
        return False
    return True


# RFC 3987's `ucschar` and `iprivate`: the non-ASCII characters an IRI may hold (`iprivate`
# only in its query).
_UCSCHAR = (
    (0xA0, 0xD7FF),
    (0xF900, 0xFDCF),
    (0xFDF0, 0xFFEF),
    *((plane, plane + 0xFFFD) for plane in range(0x10000, 0xE0000, 0x10000)),
    (0xE1000, 0xEFFFD),
)
_IPRIVATE = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_IRI_DRAFTS = (Draft7Validator, Draft201909Validator, Draft202012Validator)


def _in(ranges: tuple[tuple[int, int], ...], char: str) -> bool:
    return any(low <= ord(char) <= high for low, high in ranges)


def _as_uri(value: str) -> str | None:
    """The URI an IRI maps to (RFC 3987 section 3.1: each non-ASCII character percent-encoded
    as UTF-8), or None when it holds a character no IRI may hold."""
    out: list[str] = []
    query = False
    for char in value:
        if char == "?":
            query = True
        elif char == "#":
            query = False
        if char.isascii():
            out.append(char)
        elif _in(_UCSCHAR, char) or (query and _in(_IPRIVATE, char)):
            out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
        else:
            return None
    return "".join(out)


def _is_iri(value: object, rule: str = "URI") -> bool:
    # The `iri` formats are checked here rather than by jsonschema's optional `rfc3987-syntax`,
    # which compiles an Earley grammar on import: two seconds of CPU in every process that
    # imports jsonschema (the bot, each CLI command), for two formats.
    if not isinstance(value, str):
        return True
    uri = _as_uri(value)
    return uri is not None and bool(validate_rfc3986(uri, rule=rule))


def _is_iri_reference(value: object) -> bool:
    return _is_iri(value, rule="URI_reference")


@functools.cache
def _format_checker(cls: type[Validator]) -> FormatChecker:
    """The draft's format checker, plus `date-time` (jsonschema checks it only when the optional
    `rfc3339-validator` is installed, and otherwise lets "tomorrow" through silently) and, from
    draft 7 on, `iri` and `iri-reference` (see `_is_iri`)."""
    checker = copy.deepcopy(cls.FORMAT_CHECKER)
    if "date-time" not in checker.checkers:
        checker.checks("date-time")(_is_date_time)
    if cls in _IRI_DRAFTS:
        checker.checks("iri")(_is_iri)
        checker.checks("iri-reference")(_is_iri_reference)
    return checker


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Validator:
    # Keyed by the canonical JSON: schemas are dicts (unhashable), and the same question's schema
    # comes back from the store as an equal but new dict on every click.
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise AnswerSchemaError(f"not a JSON Schema: {exc.message}") from None
    return cls(schema, format_checker=_format_checker(cls))


def _canonical(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def check_schema(schema: dict[str, Any] | None) -> None:
    """Raise `AnswerSchemaError` for a schema that can never validate anything."""
    if schema is not None:
        _validator(_canonical(schema))


def schema_errors(schema: dict[str, Any] | None, value: Any) -> list[ValidationError]:
    """Every violation of `schema` by `value`, most relevant first; none when `schema` is None."""
    if schema is None:
        return []
    try:
        errors = list(_validator(_canonical(schema)).iter_errors(value))
    except Unresolvable as exc:
        raise AnswerSchemaError(f"a `$ref` that cannot be found: {exc}") from exc
    return sorted(errors, key=jsonschema.exceptions.relevance, reverse=True)
