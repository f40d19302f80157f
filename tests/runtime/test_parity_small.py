"""Smaller seed-parity items: the JSON form of `Cancel`, and per-tool redaction."""

from __future__ import annotations

from typing import Any

import pytest

from bot import InvalidResumeValue, Tool, UsageError
from bot.tools import ask_user
from state import Store

from .conftest import events_of, make_agent, script


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"type": "cancel", "reason": "changed my mind"}, "changed my mind"),
        ({"type": "cancel"}, "cancelled"),
    ],
)
async def test_json_cancel_ends_the_run_like_cancel(
    store: Store, answer: dict[str, Any], said: str
) -> None:
    agent = make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "Why?"}}), [ask_user]
    )
    pending, out, _ = await events_of(agent(prompt="x"))
    done = await agent(parent_id=out.run_id, resume={pending[0].interaction_id: answer}).collect()
    assert (done.status.code, done.status.reason, done.status.message) == (
        "cancelled",
        "cancelled",
        said,
    )


async def test_a_dict_with_more_keys_is_an_answer_not_a_cancel(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "Why?"}}), [ask_user]
    )
    pending, out, _ = await events_of(agent(prompt="x"))
    # ask_user takes a string: an object with a `type` key is an invalid answer, refused.
    with pytest.raises(InvalidResumeValue):
        await agent(
            parent_id=out.run_id,
            resume={pending[0].interaction_id: {"type": "cancel", "reason": "x", "extra": 1}},
        ).collect()


async def test_per_tool_redaction_hides_named_arguments(store: Store) -> None:
    def rotate(service: str, vault_path: str, password: str, options: dict[str, str]) -> str:
        return "rotated"

    tool = Tool(rotate, requires_approval=True, redact=["Vault_Path", "region"])
    agent = make_agent(
        store,
        script(
            {
                "name": "rotate",
                "arguments": {
                    "service": "api",
                    "vault_path": "secret/prod/api",
                    "password": "hunter2",
                    "options": {"region": "eu-west-1", "mode": "fast"},
                },
            }
        ),
        [tool],
    )
    pending, _, _ = await events_of(agent(prompt="rotate"))
    shown = pending[0].payload["arguments"]
    assert shown == {
        "service": "api",
        "vault_path": "[redacted]",
        "password": "[redacted]",
        "options": {"region": "[redacted]", "mode": "fast"},
    }


@pytest.mark.parametrize("names", ["token", [""], [1]])
def test_redact_takes_a_list_of_names(names: Any) -> None:
    def rotate(service: str) -> str:
        return "rotated"

    with pytest.raises(UsageError, match="redact must be a list of argument names"):
        Tool(rotate, redact=names)
