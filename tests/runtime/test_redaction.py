"""What `redact` hides before arguments are shown to people: values under secret-looking names,
and secret-looking parts of any text (`mask_text`)."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from bot import Tool

# The redactor itself, tested as a unit (cards and logs use it through the runtime).
from bot._redact import REDACTED, mask_text, redact
from state import Store

from .conftest import (
    events_of,
    make_agent,
    script,
)


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


class Credentials(BaseModel):
    user: str
    token: str


async def test_approval_redacts_inside_model_typed_arguments(store: Store) -> None:
    def login(host: str, creds: Credentials, db_pwd: str, aws_access_key: str) -> str:
        return f"logged in as {creds.user}"

    arguments = {
        "host": "db1",
        "creds": {"user": "ann", "token": "tok-s3cr3t"},
        "db_pwd": "pwd-s3cr3t",
        "aws_access_key": "AKIA-s3cr3t",
    }
    agent = make_agent(
        store,
        script({"name": "login", "arguments": arguments}),
        [Tool(login, requires_approval=True)],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload["arguments"] == {
        "host": "db1",
        "creds": {"user": "ann", "token": "[redacted]"},
        "db_pwd": "[redacted]",
        "aws_access_key": "[redacted]",
    }
    assert "s3cr3t" not in p.model_dump_json()
    saved = await store.load_run(out.run_id)
    assert saved is not None and "s3cr3t" not in json.dumps(saved.interactions[0].payload)
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert result.output == "done: logged in as ann"
