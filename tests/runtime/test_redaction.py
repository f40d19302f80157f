"""What `redact` hides before arguments are shown to people: values under secret-looking names,
and secret-looking parts of any text (`mask_text`)."""

from __future__ import annotations

import pytest

from bot._redact import REDACTED, mask_text, redact


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("token=hunter2-slash", f"token={REDACTED}"),
        ("deploy with password: s3cret now", f"deploy with password: {REDACTED} now"),
        ('session_token="two words"', f"session_token={REDACTED}"),
        ("Authorization: Bearer abc.def", f"Authorization: Bearer {REDACTED}"),
        ("use xoxb-1234567890-abcdef here", f"use {REDACTED} here"),
        ("key ghp_abcdefghijkl and sk-abcdefghij", f"key {REDACTED} and {REDACTED}"),
    ],
)
def test_secret_looking_parts_of_a_text_are_masked(text: str, shown: str) -> None:
    assert mask_text(text) == shown


@pytest.mark.parametrize(
    "text", ["api 2.3 staging", "note=hello", "https://example.com/a?b=c", "a b c", ""]
)
def test_ordinary_text_is_left_as_it_is(text: str) -> None:
    assert mask_text(text) == text


def test_redact_hides_secret_names_and_masks_other_text_deep_inside() -> None:
    value = {"service": "api", "token": "x", "notes": ["token=abc", {"api_key": 1}]}
    assert redact(value, frozenset({"service"})) == {
        "service": REDACTED,
        "token": REDACTED,
        "notes": [f"token={REDACTED}", {"api_key": REDACTED}],
    }
