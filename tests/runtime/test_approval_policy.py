"""Approval policies fail closed: anything but a real bool ends the run before the tool runs."""

from __future__ import annotations

from typing import Any

import pytest

from bot import ApprovalPolicyError, Tool, UsageError
from state import Store

from .conftest import events_of, make_agent, script


def _sync_returning(value: Any) -> Any:
    def policy(replicas: int) -> Any:
        return value

    return policy


def _raising(replicas: int) -> bool:
    raise KeyError("no policy")


async def _async_raising(replicas: int) -> bool:
    raise RuntimeError("policy service down")


def _async_returning(value: Any) -> Any:
    async def policy(replicas: int) -> Any:
        return value

    return policy


WRONG = [
    pytest.param(_sync_returning(None), "got None", id="none"),
    pytest.param(_sync_returning([]), "got []", id="empty-list"),
    pytest.param(_sync_returning("yes"), "got 'yes'", id="string"),
    pytest.param(_sync_returning(""), "got ''", id="empty-string"),
    pytest.param(_sync_returning(1), "got 1", id="one"),
    pytest.param(_sync_returning(0), "got 0", id="zero"),
    pytest.param(_sync_returning({"approve": True}), "got {'approve': True}", id="dict"),
    pytest.param(_raising, "raised KeyError", id="raises"),
    pytest.param(_async_raising, "raised RuntimeError", id="async-raises"),
    pytest.param(_async_returning(None), "got None", id="async-none"),
]


def _scale_agent(store: Store, policy: Any, ran: list[int]) -> Any:
    def scale(replicas: int) -> str:
        ran.append(replicas)
        return "scaled"

    return make_agent(
        store,
        script({"name": "scale", "arguments": {"replicas": 3}}),
        [Tool(scale, requires_approval=policy)],
    )


@pytest.mark.parametrize(("policy", "said"), WRONG)
async def test_a_policy_that_does_not_answer_a_bool_ends_the_run(
    store: Store, policy: Any, said: str
) -> None:
    ran: list[int] = []
    agent = _scale_agent(store, policy, ran)
    pending, out, _ = await events_of(agent(prompt="scale to 3"))
    assert ran == [] and pending == []
    assert out.status.code == "error"
    assert out.error is not None
    assert out.error.startswith("ApprovalPolicyError: The approval policy of tool `scale`")
    assert said in out.error
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.status == "error" and saved.pending_calls == []


async def test_a_failing_policy_stops_sibling_calls_too(store: Store) -> None:
    ran: list[str] = []

    def scale(replicas: int) -> str:
        ran.append("scale")
        return "scaled"

    def restart(service: str) -> str:
        ran.append("restart")
        return "restarted"

    agent = make_agent(
        store,
        script(
            {"name": "restart", "arguments": {"service": "api"}},
            {"name": "scale", "arguments": {"replicas": 3}},
        ),
        [restart, Tool(scale, requires_approval=_sync_returning(None))],
    )
    out = await agent(prompt="go").collect()
    assert out.status.code == "error" and ran == []


@pytest.mark.parametrize(
    ("result", "gated"), [(True, True), (False, False)], ids=["async-true", "async-false"]
)
async def test_async_policies_are_awaited(store: Store, result: bool, gated: bool) -> None:
    ran: list[int] = []
    agent = _scale_agent(store, _async_returning(result), ran)
    pending, out, _ = await events_of(agent(prompt="scale to 3"))
    if gated:
        assert [p.kind for p in pending] == ["approval"] and ran == []
        assert out.status.reason == "input_required"
        done = await agent(parent_id=out.run_id, resume={pending[0].interaction_id: True}).collect()
        assert done.status.code == "success" and ran == [3]
    else:
        assert pending == [] and ran == [3] and out.status.code == "success"


async def test_policy_over_arguments_still_decides(store: Store) -> None:
    ran: list[int] = []

    def policy(replicas: int) -> bool:
        return replicas > 10

    agent = _scale_agent(store, policy, ran)
    out = await agent(prompt="scale").collect()
    assert out.status.code == "success" and ran == [3]


def test_approval_policy_error_is_exported_under_the_root() -> None:
    from bot import HandbackError

    assert issubclass(ApprovalPolicyError, HandbackError)


@pytest.mark.parametrize("rule", [None, "yes", 1, ["U1"]], ids=["none", "str", "int", "list"])
def test_requires_approval_of_the_wrong_type_is_refused_at_definition(rule: Any) -> None:
    def scale(replicas: int) -> str:
        return "scaled"

    with pytest.raises(UsageError, match="must be a bool, an Approval or a callable"):
        Tool(scale, requires_approval=rule)
