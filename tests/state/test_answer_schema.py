"""One validator for answers: what a card accepts, the runtime accepts, and the reverse."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blocks import InvalidAnswer

# The one validator behind both ends (the card's and the runtime's), compared directly.
from blocks._validate import validate
from bot import InvalidResumeValue, UsageError

# The runtime's end of the same validator (what a resume and `suspend()` check), compared too.
from bot._schema import check_answer, check_schema
from state import AnswerSchemaError, PendingInteraction, schema_errors

FORMATS = [
    "date-time",
    "date",
    "time",
    "email",
    "uri",
    "iri",
    "iri-reference",
    "ipv4",
    "ipv6",
    "uuid",
    "hostname",
]

SAMPLES = [
    "2026-11-30T14:00:00Z",
    "2026-11-30 14:00:00+01:00",
    "tomorrow",
    "2026-11-30",
    "2026-02-30",
    "14:00:00Z",
    "bob@example.com",
    "not an email",
    "https://example.com/x?y=1",
    "example.com",
    "10.0.0.1",
    "999.0.0.1",
    "::1",
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "api.example.com",
    "-bad-.host",
    "",
]


def _pending(schema: dict[str, Any]) -> PendingInteraction:
    return PendingInteraction(
        interaction_id="i1", kind="question", payload={}, response_schema=schema
    )


def _card_accepts(schema: dict[str, Any], value: Any) -> bool:
    try:
        validate(schema, value)
    except InvalidAnswer:
        return False
    return True


def _runtime_accepts(schema: dict[str, Any], value: Any) -> bool:
    try:
        check_answer("r1", _pending(schema), value)
    except InvalidResumeValue:
        return False
    return True


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("value", SAMPLES)
def test_card_and_runtime_agree_on_formats(fmt: str, value: str) -> None:
    schema = {"type": "string", "format": fmt}
    assert _card_accepts(schema, value) == _runtime_accepts(schema, value)


def test_date_time_is_checked_on_both_sides() -> None:
    # The disagreement that once cancelled a run: the runtime let "tomorrow" through as a
    # date-time (or refused what the card took); both now refuse it.
    schema = {"type": "string", "format": "date-time"}
    assert not _card_accepts(schema, "tomorrow")
    assert not _runtime_accepts(schema, "tomorrow")
    assert _card_accepts(schema, "2026-11-30T14:00:00Z")
    assert _runtime_accepts(schema, "2026-11-30T14:00:00Z")


@settings(max_examples=300, deadline=None)
@given(
    fmt=st.sampled_from(FORMATS),
    value=st.one_of(
        st.text(max_size=40),
        st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}Z?)?"),
        st.integers(),
    ),
)
def test_card_and_runtime_agree_on_hostile_values(fmt: str, value: Any) -> None:
    schema = {"type": ["string", "integer"], "format": fmt}
    assert _card_accepts(schema, value) == _runtime_accepts(schema, value)


@settings(max_examples=200, deadline=None)
@given(
    minimum=st.integers(-100, 100),
    value=st.one_of(st.integers(-200, 200), st.floats(allow_nan=False), st.text(max_size=5)),
)
def test_card_and_runtime_agree_on_numbers(minimum: int, value: Any) -> None:
    schema = {"type": "integer", "minimum": minimum, "maximum": minimum + 50}
    assert _card_accepts(schema, value) == _runtime_accepts(schema, value)


@pytest.mark.parametrize(
    ("value", "iri", "reference"),
    [
        ("https://例え.jp/パス?q=値#ü", True, True),
        ("https://example.com/x?y=1", True, True),
        ("urn:isbn:0451450523", True, True),
        ("//example.com/a", False, True),
        ("../a/b", False, True),
        ("not an iri", False, False),
        ("https://example.com/a b", False, False),
        ("https://example.com/\x85", False, False),  # a C1 control is no `ucschar`
        ("https://example.com/?q=\ue000", True, True),  # private use, in the query only
        ("https://example.com/\ue000", False, False),
        ("https://exa[mple.com/", False, False),
    ],
)
def test_iri_formats_are_checked_on_both_sides(value: str, iri: bool, reference: bool) -> None:
    for fmt, expected in (("iri", iri), ("iri-reference", reference)):
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "format": fmt}
        assert _card_accepts(schema, value) is expected, (fmt, value)
        assert _runtime_accepts(schema, value) is expected, (fmt, value)


def test_draft_4_knows_no_iri_format_and_lets_any_string_through() -> None:
    schema = {"$schema": "http://json-schema.org/draft-04/schema#", "format": "iri"}
    assert schema_errors(schema, "not an iri") == []


def test_importing_the_packages_compiles_no_iri_grammar() -> None:
    # `rfc3987-syntax` (jsonschema's optional `iri` checker) builds an Earley parser on import:
    # about two seconds of CPU in every bot and CLI process. The project does not install it.
    import blocks  # noqa: F401
    import bot  # noqa: F401
    import state  # noqa: F401

    assert "rfc3987_syntax" not in sys.modules


def test_broken_schema_is_refused_on_both_sides_with_a_plain_message() -> None:
    broken = {"type": "no-such-type"}
    with pytest.raises(AnswerSchemaError):
        schema_errors(broken, "x")
    with pytest.raises(InvalidAnswer, match="invalid answer schema"):
        validate(broken, "x")
    with pytest.raises(UsageError, match="response_schema is invalid"):
        check_schema(broken)
    with pytest.raises(InvalidResumeValue, match="response_schema is invalid"):
        check_answer("r1", _pending(broken), "x")


def test_unresolvable_ref_is_refused_not_fetched() -> None:
    schema = {"$ref": "https://example.invalid/schema.json"}
    with pytest.raises(AnswerSchemaError, match="cannot be found"):
        schema_errors(schema, "x")
    with pytest.raises(InvalidAnswer):
        validate(schema, "x")
