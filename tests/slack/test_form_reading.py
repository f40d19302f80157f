"""The gate reads form bodies with yarl's `query_to_pairs` (fast) where Bolt and the standard
library use `parse_qsl`: the two must agree on every body, or a click could mean one thing to
the gate's checks and another to what it records."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st
from yarl import query_to_pairs

# The gate's form parser, compared with Bolt's and the standard library's on every body.
from bot.slack._verify import Misfit, parse_body

_piece = st.lists(
    st.sampled_from([*"ab=&;+% \t{}\"'é€\x00", "%2B", "%26", "%3D", "%zz", "%E2%82", "%7B"]),
    max_size=40,
).map("".join)


@given(body=_piece)
def test_raw_bodies_read_the_same_as_parse_qsl(body: str) -> None:
    assert query_to_pairs(body) == parse_qsl(body, keep_blank_values=True)


@given(
    fields=st.lists(st.tuples(st.text(max_size=12), st.text(max_size=60)), max_size=6),
)
def test_encoded_forms_read_the_same_as_parse_qsl(fields: list[tuple[str, str]]) -> None:
    body = "&".join(f"{quote_plus(k)}={quote_plus(v)}" for k, v in fields)
    assert (
        query_to_pairs(body)
        == parse_qsl(body, keep_blank_values=True)
        == [(k, v) for k, v in fields if body]
    )


def test_a_form_without_a_payload_field_is_no_payload() -> None:
    with pytest.raises(Misfit):
        parse_body("token=x&payload_x=1", "application/x-www-form-urlencoded")
    assert parse_body("payload=%7B%22a%22%3A+1%7D", None) == {"a": 1}
