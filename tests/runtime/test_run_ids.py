"""Caller-chosen run ids: calling again with the same id (a retried work item) never redoes work."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent, Cancel, RunAlreadyResumed, Tool, UsageError
from bot.events import InteractionEvent, OutputEvent, StartEvent
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import Store

from .conftest import CountingStore, events_of, make_agent, script


def _deploy_agent(store: Any, ran: list[str], **kw: Any) -> Any:
    def deploy(service: str) -> str:
        ran.append(service)
        return f"deployed {service}"

    fn = script({"name": "deploy", "arguments": {"service": "api"}})
    return make_agent(store, fn, [Tool(deploy, **kw)])


@pytest.mark.parametrize(
    "run_id", ["", " run", "run 1", "ré", "x" * 201, "-leading-dash", "a\nb", 7]
)
async def test_run_id_must_be_a_sensible_string(store: Store, run_id: Any) -> None:
    agent = make_agent(store, script(), [])
    with pytest.raises(UsageError, match="run_id"):
        agent(prompt="x", run_id=run_id)


async def test_run_id_cannot_be_its_own_parent(store: Store) -> None:
    agent = make_agent(store, script(), [])
    with pytest.raises(UsageError, match="own parent"):
        agent(prompt="x", parent_id="work:1", run_id="work:1")


async def test_the_run_is_saved_under_the_chosen_id(store: Store) -> None:
    ran: list[str] = []
    agent = _deploy_agent(store, ran)
    result = await agent(prompt="x", run_id="slack:T1/Ev42").collect()
    assert result.run_id == "slack:T1/Ev42" and result.output == "done: deployed api"
    saved = await store.load_run("slack:T1/Ev42")
    assert saved is not None and saved.status == "success" and saved.root_id == "slack:T1/Ev42"


async def test_a_finished_run_is_replayed_from_the_store_not_run_again(store: Store) -> None:
    ran: list[str] = []
    agent = _deploy_agent(store, ran)
    first = await agent(prompt="x", run_id="work-1").collect()
    calls = agent.model.calls  # type: ignore[attr-defined]
    _, again, events = await events_of(agent(prompt="x", run_id="work-1"))
    assert ran == ["api"] and agent.model.calls == calls  # type: ignore[attr-defined]
    assert [type(e) for e in events] == [StartEvent, OutputEvent]
    assert again == first
    assert await agent(prompt="x", run_id="work-1").collect() == first


async def test_a_paused_run_is_replayed_with_its_interactions(store: Store) -> None:
    ran: list[str] = []
    agent = _deploy_agent(store, ran, requires_approval=True)
    pending, paused, _ = await events_of(agent(prompt="x", run_id="work-2"))
    calls = agent.model.calls
    again, output, events = await events_of(agent(prompt="x", run_id="work-2"))
    assert agent.model.calls == calls and ran == []
    assert [type(e) for e in events] == [StartEvent, InteractionEvent, OutputEvent]
    assert again == pending and output == paused
    assert output.status.reason == "input_required"
    # The replayed card resumes the run as the first one would have.
    (approval,) = again
    done = await agent(parent_id="work-2", resume={approval.interaction_id: True}).collect()
    assert done.output == "done: deployed api" and ran == ["api"]


@pytest.mark.parametrize("how", ["error", "cancelled"])
async def test_an_error_or_a_cancel_is_replayed_with_its_message(store: Store, how: str) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        if how == "error":
            raise ValueError("model down")
        return [{"name": "ask_user", "arguments": {"question": "q?"}}]

    agent = make_agent(store, fn, [ask_user])
    if how == "error":
        first = await agent(prompt="x", run_id="work-3").collect()
    else:
        (p,), paused, _ = await events_of(agent(prompt="x"))
        first = await agent(
            parent_id=paused.run_id, resume={p.interaction_id: Cancel("expired")}, run_id="work-3"
        ).collect()
    again = await agent(prompt="x", run_id="work-3", parent_id=first.parent_id).collect()
    assert again == first
    assert again.status.message == ("ValueError: model down" if how == "error" else "expired")


async def test_a_retried_resume_whose_first_attempt_claimed_and_saved_nothing(store: Store) -> None:
    ran: list[str] = []
    agent = _deploy_agent(store, ran, requires_approval=True)
    (p,), paused, _ = await events_of(agent(prompt="x"))
    # The first attempt claimed the parent, then its process died.
    claim = await store.claim_run(paused.run_id, child_id="work-4")
    assert claim.won
    with pytest.raises(RunAlreadyResumed) as lost:
        await agent(parent_id=paused.run_id, resume={p.interaction_id: True}).collect()
    assert lost.value.resumed_by == "work-4"
    done = await agent(
        parent_id=paused.run_id, resume={p.interaction_id: True}, run_id="work-4"
    ).collect()
    assert done.status.code == "success" and ran == ["api"]


async def test_a_retried_resume_that_ended_is_replayed(store: Store) -> None:
    ran: list[str] = []
    agent = _deploy_agent(store, ran, requires_approval=True)
    (p,), paused, _ = await events_of(agent(prompt="x"))
    answer = {p.interaction_id: True}
    first = await agent(parent_id=paused.run_id, resume=answer, run_id="work-5").collect()
    again = await agent(parent_id=paused.run_id, resume=answer, run_id="work-5").collect()
    assert again == first and ran == ["api"]


async def test_a_retried_continuation_is_replayed(store: Store) -> None:
    agent = make_agent(store, lambda messages: f"turn {len(messages)}", [])
    first = await agent(prompt="hello").collect()
    second = await agent(prompt="more", parent_id=first.run_id, run_id="work-6").collect()
    again = await agent(prompt="more", parent_id=first.run_id, run_id="work-6").collect()
    assert again == second and agent.model.calls == 2


async def test_a_run_id_that_names_another_run_is_refused(store: Store) -> None:
    agent = make_agent(store, lambda messages: "ok", [])
    first = await agent(prompt="one", run_id="work-7").collect()
    with pytest.raises(UsageError, match="work-7"):
        await agent(prompt="two", parent_id=first.run_id, run_id="work-7").collect()
    other = Agent(name="other", model=FunctionModel(lambda messages: "ok"), store=store)
    with pytest.raises(UsageError, match="work-7"):
        await other(prompt="one", run_id="work-7").collect()


async def test_a_chosen_id_costs_no_read_on_a_first_resume(store: Store) -> None:
    counting = CountingStore(store)
    fn = script({"name": "ask_user", "arguments": {"question": "q?"}})
    agent = make_agent(counting, fn, [ask_user])  # type: ignore[arg-type]
    (p,), paused, _ = await events_of(agent(prompt="x", run_id="work-8a"))
    # A new conversation with a chosen id reads it once: it may be a retry.
    assert counting.take() == ["load_run", "save_run"]
    await agent(parent_id=paused.run_id, resume={p.interaction_id: "y"}, run_id="work-8b").collect()
    # The parent is paused and unclaimed, so no earlier attempt of this run can exist.
    assert counting.take() == ["load_run", "claim_run", "save_run"]


async def test_a_resume_from_a_parent_the_caller_claimed_reads_and_claims_nothing(
    store: Store,
) -> None:
    counting = CountingStore(store)
    fn = script({"name": "ask_user", "arguments": {"question": "q?"}})
    agent = make_agent(counting, fn, [ask_user])  # type: ignore[arg-type]
    (p,), paused, _ = await events_of(agent(prompt="x"))
    claim = await store.claim_run(paused.run_id, child_id="work-9")
    assert claim.won and claim.run is not None
    counting.take()
    done = await agent(
        parent_id=paused.run_id, resume={p.interaction_id: "y"}, run_id="work-9", claimed=claim.run
    ).collect()
    assert done.status.code == "success" and done.run_id == "work-9"
    assert counting.take() == ["save_run"]
    saved = await store.load_run("work-9")
    assert saved is not None and saved.parent_id == paused.run_id


@pytest.mark.parametrize("wrong", ["parent", "child", "no-resume", "no-run-id"])
async def test_claimed_must_be_the_parent_claimed_for_this_run(store: Store, wrong: str) -> None:
    fn = script({"name": "ask_user", "arguments": {"question": "q?"}})
    agent = make_agent(store, fn, [ask_user])
    (p,), paused, _ = await events_of(agent(prompt="x"))
    claim = await store.claim_run(paused.run_id, child_id="work-10")
    assert claim.run is not None
    call: dict[str, Any] = {
        "parent_id": paused.run_id,
        "resume": {p.interaction_id: "y"},
        "run_id": "work-10",
        "claimed": claim.run,
    }
    if wrong == "parent":
        call["parent_id"] = "another-run"
    elif wrong == "child":
        call["run_id"] = "work-11"
    elif wrong == "no-resume":
        call["resume"], call["prompt"] = None, "x"
    else:
        call["run_id"] = None
    with pytest.raises(UsageError, match="claimed"):
        agent(**call)
