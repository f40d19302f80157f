"""`Approval`: one value for an approval rule, checked when it is built, carried in the approval's
payload (outside the interaction id), read back by the Slack policy, and failing closed."""

from __future__ import annotations

from typing import Any

import pytest

from blocks import ANYONE
from bot import Approval, ApprovalPolicyError, ApprovalRuleError, Tool
from bot.slack import AnswerPolicy
from state import RULE_KEY, CorruptRecordError, InteractionRecord, Store, approval_of, open_store

from .conftest import events_of, make_agent, script

BAD = [
    pytest.param({"count": 0}, "count", id="count-zero"),
    pytest.param({"count": True}, "count", id="count-bool"),
    pytest.param({"count": 1.5}, "count", id="count-float"),
    pytest.param({"approvers": "U012ABC"}, "must be a list", id="approvers-str"),
    pytest.param({"approvers": ["alice"]}, "not a Slack user", id="approvers-name"),
    pytest.param({"escalate_to": ["#ops"]}, "not a Slack user", id="escalate-channel"),
    pytest.param({"grants": ["team"]}, "not a grant scope", id="grants-unknown"),
    pytest.param({"grants": ["thread", "thread"]}, "repeats", id="grants-twice"),
    pytest.param({"grants": ["thread"], "count": 2}, "more than one approver", id="grants-two"),
    pytest.param({"grant_ttl": 0}, "grant_ttl", id="ttl-zero"),
    pytest.param({"grant_ttl": float("inf")}, "grant_ttl", id="ttl-inf"),
    pytest.param({"remind_after": -1}, "remind_after", id="remind-negative"),
    pytest.param({"escalate_to": ["S0LEADS"]}, "needs remind_after", id="escalate-no-remind"),
    pytest.param(
        {"remind_after": 60, "escalate_after": 60}, "needs escalate_to", id="after-no-whom"
    ),
    pytest.param({"editable": "yes"}, "editable", id="editable-str"),
    pytest.param({"editable": True, "count": 2}, "count > 1", id="editable-two"),
]


@pytest.mark.parametrize(("fields", "said"), BAD)
def test_a_rule_that_cannot_work_is_refused_when_built(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(ApprovalRuleError, match=said):
        Approval(**fields)


def test_a_rule_reads_back_equal_and_escalation_follows_the_reminder() -> None:
    rule = Approval(
        approvers=["U012ABC", "S0OPS"],
        count=2,
        remind_after=900,
        escalate_to=["S0LEADS"],
    )
    assert rule.approvers == ("U012ABC", "S0OPS") and rule.escalation_delay == 900
    record = InteractionRecord(
        interaction_id="i", run_id="r", kind="approval", payload={RULE_KEY: rule.to_json()}
    )
    assert approval_of(record) == rule
    quick = Approval(remind_after=60, escalate_to=["U0LEAD"], escalate_after=30)
    assert quick.escalation_delay == 30
    assert Approval(remind_after=60).escalation_delay is None


def test_old_approvals_read_as_the_default_rule_and_questions_have_none() -> None:
    old = InteractionRecord(interaction_id="i", run_id="r", kind="approval", payload={})
    assert approval_of(old) == Approval()
    question = InteractionRecord(interaction_id="q", run_id="r", kind="ask_user", payload={})
    assert approval_of(question) is None


@pytest.mark.parametrize(
    "raw",
    [{"count": 0}, {"count": "two"}, {"approvers": ["nobody"]}, "count=2", {"grants": ["x"]}],
)
async def test_a_corrupt_stored_rule_refuses_everyone(raw: Any) -> None:
    record = InteractionRecord(
        interaction_id="i",
        run_id="r",
        kind="approval",
        payload={"tool": "deploy", RULE_KEY: raw},
        requester="U0ALICE",
    )
    with pytest.raises(CorruptRecordError):
        approval_of(record)

    async def lookup(group: str) -> frozenset[str]:
        return frozenset()

    refusal = await AnswerPolicy().refusal(record, "U0BOB", lookup)
    assert refusal is not None and "cannot be read" in refusal


async def test_the_rule_rides_in_the_payload_and_not_in_the_id() -> None:
    rule = Approval(approvers=["U0BOB"], count=2, remind_after=600)

    def deploy(service: str) -> str:
        return f"deployed {service}"

    ids: list[str] = []
    for requires in (rule, True):
        # The same run and call under each rule, each in a store of its own.
        async with open_store("sqlite:///:memory:") as store:
            agent = make_agent(
                store,
                script({"name": "deploy", "arguments": {"service": "api"}, "id": "call_0"}),
                [Tool(deploy, requires_approval=requires)],
            )
            pending, out, _ = await events_of(agent(prompt="deploy api", run_id="r-deploy"))
        assert out.status.reason == "input_required" and len(pending) == 1
        payload = pending[0].payload
        assert payload[RULE_KEY] == (rule if requires is rule else Approval()).to_json()
        stored = InteractionRecord(
            interaction_id=pending[0].interaction_id,
            run_id=out.run_id,
            kind="approval",
            payload=payload,
        )
        assert approval_of(stored) == (rule if requires is rule else Approval())
        ids.append(pending[0].interaction_id)
    # The id hashes the call alone, so a rule changed by a deploy orphans nothing.
    assert ids[0] == ids[1]


async def test_a_policy_may_answer_with_a_rule_per_call(store: Store) -> None:
    strict = Approval(count=2)

    def policy(environment: str) -> bool | Approval:
        return strict if environment == "prod" else environment == "staging"

    def deploy(environment: str) -> str:
        return f"deployed to {environment}"

    rules = {}
    for env in ("prod", "staging", "dev"):
        agent = make_agent(
            store,
            script({"name": "deploy", "arguments": {"environment": env}}),
            [Tool(deploy, requires_approval=policy)],
        )
        pending, out, _ = await events_of(agent(prompt=f"deploy to {env}"))
        rules[env] = pending[0].payload[RULE_KEY] if pending else out.output
    assert rules["prod"] == strict.to_json()
    assert rules["staging"] == Approval().to_json()
    assert "deployed to dev" in str(rules["dev"])


async def test_a_policy_returning_something_else_still_fails_closed(store: Store) -> None:
    ran: list[str] = []

    def deploy(environment: str) -> str:
        ran.append(environment)
        return "deployed"

    agent = make_agent(
        store,
        script({"name": "deploy", "arguments": {"environment": "prod"}}),
        [Tool(deploy, requires_approval=lambda environment: {"count": 2})],
    )
    pending, out, _ = await events_of(agent(prompt="deploy"))
    assert ran == [] and pending == [] and out.status.code == "error"
    assert out.error is not None and "True, False or an Approval" in out.error
    with pytest.raises(ApprovalPolicyError):
        await Tool(deploy, requires_approval=lambda environment: None).approval_for(
            {"environment": "prod"}
        )


async def test_the_rule_names_the_approvers_and_several_never_admit_the_requester() -> None:
    async def lookup(group: str) -> frozenset[str]:
        return frozenset({"U0CAROL"}) if group == "S0OPS" else frozenset()

    def approval(rule: Approval, requester: str = "U0ALICE") -> InteractionRecord:
        return InteractionRecord(
            interaction_id="i",
            run_id="r",
            kind="approval",
            payload={"tool": "deploy", "arguments": {}, RULE_KEY: rule.to_json()},
            requester=requester,
        )

    env = AnswerPolicy(approvers=("U0BOB",), tool_approvers={"deploy": ("U0DAVE",)})
    named = approval(Approval(approvers=["S0OPS"]))
    # The rule's list wins over the tool's list and the global one.
    assert await env.refusal(named, "U0CAROL", lookup) is None
    assert await env.refusal(named, "U0DAVE", lookup) is not None
    assert await env.refusal(named, "U0BOB", lookup) is not None
    assert env.approvers_of(named) == ("S0OPS",)
    # Without a list of its own, the environment decides as before.
    assert await env.refusal(approval(Approval()), "U0DAVE", lookup) is None
    assert env.approvers_of(approval(Approval())) == ("U0DAVE",)
    # Self-approval may be allowed for one approver, never for a two-person rule.
    lax = AnswerPolicy(approvers=(ANYONE,), allow_self_approval=True)
    assert await lax.refusal(approval(Approval()), "U0ALICE", lookup) is None
    refusal = await lax.refusal(approval(Approval(count=2)), "U0ALICE", lookup)
    assert refusal is not None and "someone else" in refusal
    assert await lax.refusal(approval(Approval(count=2)), "U0ALICE", lookup, denying=True) is None


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"grants": ("thread",), "grant_requesters": ["S0OPS"]}, "not a Slack user id"),
        ({"grants": ("thread",), "grant_requesters": "U0DAVE"}, "must be a list"),
        ({"grants": ("thread",), "grant_arguments": [""]}, "not an argument name"),
        ({"grant_requesters": ["U0DAVE"]}, "they need grants"),
        ({"grant_arguments": ["environment"]}, "they need grants"),
    ],
)
def test_grant_bounds_that_cannot_work_are_refused(fields: dict[str, Any], says: str) -> None:
    with pytest.raises(ApprovalRuleError, match=says):
        Approval(**fields)


def test_grant_bounds_read_back_from_the_stored_rule() -> None:
    rule = Approval(grants=("thread",), grant_requesters=["U0DAVE"], grant_arguments=["env"])
    assert rule.to_json()["grant_requesters"] == ["U0DAVE"]
    assert Approval(**rule.to_json()) == rule
