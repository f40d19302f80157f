"""Edit before approve in the gate: an approved answer with `arguments` runs the tool with them,
merged over the model's, validated again, secrets untouched, and the model told what changed."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from bot import Approval, Tool
from state import Store, schema_errors

from .conftest import Crash, events_of, make_agent, script

RAN: list[dict[str, Any]] = []


def deploy(service: str, version: str, environment: Literal["staging", "prod"] = "staging") -> str:
    RAN.append({"service": service, "version": version, "environment": environment})
    return f"deployed {service} {version} to {environment}"


def login(user: str, token: str, realm: str = "corp") -> str:
    RAN.append({"user": user, "token": token, "realm": realm})
    return f"logged {user} in to {realm}"


DEPLOY = {"name": "deploy", "arguments": {"service": "api", "version": "2.3"}}
EDITABLE = Approval(editable=True)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    RAN.clear()


async def _answered(store: Store, tool: Tool, call: dict[str, Any], answer: Any) -> str:
    """Run the call to its approval, answer it with `answer`, and return the model's last text
    (the scripted model repeats the tool results)."""
    agent = make_agent(store, script(call), [tool])
    (pending,), out, _ = await events_of(agent(prompt="go"))
    assert RAN == []
    result = await agent(parent_id=out.run_id, resume={pending.interaction_id: answer}).collect()
    return str(result.output)


async def test_the_answer_schema_takes_edits_and_keeps_old_answers_valid(store: Store) -> None:
    agent = make_agent(store, script(DEPLOY), [Tool(deploy, requires_approval=EDITABLE)])
    (pending,), _, _ = await events_of(agent(prompt="go"))
    for answer in (
        True,
        False,
        {"approved": True},
        {"approved": False, "reason": "no"},
        {"approved": True, "arguments": {"version": "2.4"}},
    ):
        assert schema_errors(pending.response_schema, answer) == [], answer
    assert schema_errors(pending.response_schema, {"approved": True, "arguments": "2.4"})


async def test_an_edit_runs_the_tool_with_the_new_arguments_and_says_so(store: Store) -> None:
    tool = Tool(deploy, requires_approval=EDITABLE)
    answer = {"approved": True, "arguments": {"version": "2.4", "service": "api"}}
    output = await _answered(store, tool, DEPLOY, answer)
    assert RAN == [{"service": "api", "version": "2.4", "environment": "staging"}]
    assert output == (
        "done: The approver changed the arguments: version '2.3' -> '2.4'.\n"
        "deployed api 2.4 to staging"
    )


async def test_an_edit_that_changes_nothing_reads_as_a_plain_approval(store: Store) -> None:
    tool = Tool(deploy, requires_approval=EDITABLE)
    answer = {"approved": True, "arguments": {"version": "2.3"}}
    assert await _answered(store, tool, DEPLOY, answer) == "done: deployed api 2.3 to staging"


async def test_secret_arguments_keep_the_models_value(store: Store) -> None:
    tool = Tool(login, requires_approval=EDITABLE, redact=["realm"])
    call = {"name": "login", "arguments": {"user": "ann", "token": "t0ps3cret"}}
    edits = {"user": "bob", "token": "stolen", "realm": "evil"}
    output = await _answered(store, tool, call, {"approved": True, "arguments": edits})
    assert RAN == [{"user": "bob", "token": "t0ps3cret", "realm": "corp"}]
    assert output.startswith("done: The approver changed the arguments: user 'ann' -> 'bob'.\n")
    assert "stolen" not in output and "evil" not in output


@pytest.mark.parametrize(
    ("edits", "why"),
    [
        ({"version": 24}, "not valid"),
        ({"environment": "moon"}, "not valid"),
        ({"replicas": 3}, "not valid"),
    ],
)
async def test_an_invalid_edit_fails_closed(store: Store, edits: dict[str, Any], why: str) -> None:
    tool = Tool(deploy, requires_approval=EDITABLE)
    output = await _answered(store, tool, DEPLOY, {"approved": True, "arguments": edits})
    assert RAN == []
    assert "Error: the approver edited the arguments of `deploy`" in output
    assert why in output and "the tool did not run" in output


async def test_an_edit_is_refused_when_the_rule_does_not_allow_it(store: Store) -> None:
    tool = Tool(deploy, requires_approval=True)
    output = await _answered(
        store, tool, DEPLOY, {"approved": True, "arguments": {"version": "2.4"}}
    )
    assert RAN == []
    assert "does not let approvers edit them" in output


async def test_an_edit_cannot_move_the_call_under_another_rule(store: Store) -> None:
    def rule(service: str, version: str, environment: str) -> Approval:
        return Approval(count=2, editable=True) if environment == "prod" else EDITABLE

    tool = Tool(deploy, requires_approval=rule)
    output = await _answered(
        store, tool, DEPLOY, {"approved": True, "arguments": {"environment": "prod"}}
    )
    assert RAN == []
    assert "needs a different approval" in output


async def test_a_denial_ignores_any_arguments(store: Store) -> None:
    tool = Tool(deploy, requires_approval=EDITABLE)
    answer = {"approved": False, "reason": "freeze", "arguments": {"version": "9"}}
    assert await _answered(store, tool, DEPLOY, answer) == "done: Denied: freeze"
    assert RAN == []


async def test_a_retried_resume_runs_the_same_edit_under_the_same_interaction(
    store: Store,
) -> None:
    """The interaction id comes from the model's call, not the edit (else the resume would not
    find its answer and would ask again), and a retry of the resume (same run id, same stored
    answer) runs the tool with the same edited arguments."""
    crashes = [1]

    def flaky(service: str, version: str) -> str:
        RAN.append({"service": service, "version": version})
        if crashes:
            crashes.pop()
            raise Crash
        return f"deployed {service} {version}"

    tool = Tool(flaky, name="deploy", requires_approval=EDITABLE, idempotent=True)
    agent = make_agent(store, script(DEPLOY), [tool])
    (pending,), out, _ = await events_of(agent(prompt="go"))
    answer = {"approved": True, "arguments": {"version": "2.4"}}
    resume = {pending.interaction_id: answer}
    with pytest.raises(Crash):
        await agent(parent_id=out.run_id, resume=resume, run_id="resume-1").collect()
    result = await agent(parent_id=out.run_id, resume=resume, run_id="resume-1").collect()
    assert RAN == [{"service": "api", "version": "2.4"}] * 2
    assert result.output == (
        "done: The approver changed the arguments: version '2.3' -> '2.4'.\ndeployed api 2.4"
    )
