"""Nested agents: an agent used as a tool of another pauses it, resumes with it, and is cancelled
and stopped with it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot import Agent, Cancel, Tool, current_call, suspend
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import Store

from .conftest import Crash, events_of, script

CRASHED = "Interrupted: the process stopped while this ran; it may or may not have taken effect."
ASK = {"name": "ask_user", "arguments": {"question": "Which database?"}}


def _agent(store: Store, name: str, fn: Any, tools: list[Any], **kw: Any) -> Agent:
    return Agent(name=name, model=FunctionModel(fn), tools=tools, store=store, **kw)


def _calls(agent: Agent) -> int:
    return agent.model.calls  # type: ignore[attr-defined, no-any-return]


def _outer(store: Store, inner: Agent, *, name: str = "outer", prompt: str = "go") -> Agent:
    return _agent(
        store, name, script({"name": inner.name, "arguments": {"prompt": prompt}}), [inner]
    )


def _two_levels(store: Store, ran: list[str]) -> tuple[Agent, Agent, Agent]:
    """outer -> mid -> inner; inner asks a question and needs an approval, in one step."""

    def deploy(service: str) -> str:
        ran.append(service)
        return f"deployed {service}"

    deploy_call = {"name": "deploy", "arguments": {"service": "api"}}
    inner = _agent(
        store, "inner", script(ASK, deploy_call), [ask_user, Tool(deploy, requires_approval=True)]
    )
    mid = _outer(store, inner, name="mid", prompt="ship it")
    return _outer(store, mid), mid, inner


async def test_an_agent_is_a_tool_with_its_name_description_and_a_prompt(store: Store) -> None:
    inner = _agent(
        store, "dba", lambda m: "pong: " + m[-1]["content"], [], description="Knows the databases."
    )
    outer = _outer(store, inner)
    (spec,) = outer._tool_specs
    function = spec["function"]
    assert function["name"] == "dba" and function["description"] == "Knows the databases."
    assert function["parameters"]["required"] == ["prompt"]
    assert function["parameters"]["properties"]["prompt"]["type"] == "string"
    result = await outer(prompt="hi").collect()
    assert result.output == "done: pong: go" and _calls(inner) == 1


async def test_a_suspend_deep_inside_pauses_the_outer_run_and_resumes_it(store: Store) -> None:
    looked: list[str] = []

    def lookup(name: str) -> str:
        looked.append(name)
        return f"{name} is up"

    inner_fn = script({"name": "lookup", "arguments": {"name": "db1"}}, ASK)
    inner = _agent(store, "inner", inner_fn, [lookup, ask_user])
    outer = _outer(store, inner)
    (p,), out, _ = await events_of(outer(prompt="set up my database"))
    assert (out.status.code, out.status.reason) == ("cancelled", "input_required")
    assert p.run_id == out.run_id and p.path == "outer" and p.kind == "ask_user"
    assert (p.runnable_path, p.runnable_name) == ("outer.inner.ask_user", "ask_user")
    assert p.payload == {"question": "Which database?", "options": None}
    saved = await store.load_run(out.run_id)
    assert saved is not None and [i.interaction_id for i in saved.interactions] == [
        p.interaction_id
    ]
    (call,) = saved.pending_calls
    inner_saved = await store.load_run(f"{out.run_id}/{call.tool_call_id}")
    assert inner_saved is not None and inner_saved.status == "paused"
    assert saved.nested[call.tool_call_id].run_id == inner_saved.run_id
    # The inner run's interaction is the outer run's, as it was asked (the one value).
    assert saved.interactions == inner_saved.interactions == [p.interaction]

    result = await outer(parent_id=out.run_id, resume={p.interaction_id: "postgres"}).collect()
    assert result.status.code == "success"
    assert result.output == "done: done: db1 is up | postgres"
    assert looked == ["db1"]  # the inner handler that finished did not run again
    assert (_calls(outer), _calls(inner)) == (2, 2)  # each model only for new steps
    resumed_inner = await store.load_run(f"{result.run_id}/{call.tool_call_id}")
    assert resumed_inner is not None and resumed_inner.parent_id == inner_saved.run_id
    assert resumed_inner.transcript[: len(inner_saved.transcript)] == inner_saved.transcript


async def test_two_levels_question_then_approval_in_separate_resumes(store: Store) -> None:
    ran: list[str] = []
    outer, mid, inner = _two_levels(store, ran)
    pending, out, _ = await events_of(outer(prompt="release"))
    assert sorted(p.runnable_path for p in pending) == [
        "outer.mid.inner.ask_user",
        "outer.mid.inner.deploy",
    ]
    question = next(p for p in pending if p.kind == "ask_user")
    approval = next(p for p in pending if p.kind == "approval")
    assert approval.payload["tool"] == "deploy" and approval.payload["arguments"] == {
        "service": "api"
    }
    assert ran == []

    # A process restart between the resumes: new agent objects over the same store.
    outer, mid, inner = _two_levels(store, ran)
    (again,), out2, _ = await events_of(
        outer(parent_id=out.run_id, resume={question.interaction_id: "postgres"})
    )
    assert again.interaction_id == approval.interaction_id and again.run_id == out2.run_id
    assert again.runnable_path == "outer.mid.inner.deploy" and ran == []

    outer, mid, inner = _two_levels(store, ran)
    result = await outer(parent_id=out2.run_id, resume={approval.interaction_id: True}).collect()
    assert result.status.code == "success" and ran == ["api"]
    assert result.output == "done: done: done: postgres | deployed api"
    # Each level's model was called only for the new step it had to take.
    assert (_calls(outer), _calls(mid), _calls(inner)) == (1, 1, 1)


async def test_interaction_ids_differ_by_nesting_and_are_stable_on_replay(store: Store) -> None:
    inner = _agent(store, "inner", script(ASK), [ask_user])
    (top,), _, _ = await events_of(inner(prompt="q", run_id="top"))
    outer = _outer(store, inner)
    (nested,), out, _ = await events_of(outer(prompt="q", run_id="nested"))
    assert top.payload == nested.payload and top.interaction_id != nested.interaction_id
    (replayed,), again, _ = await events_of(outer(prompt="q", run_id="nested"))
    assert replayed == nested and again == out and _calls(outer) == 1


async def test_cancel_ends_the_outer_and_every_inner_run(store: Store) -> None:
    ran: list[str] = []
    outer, mid, inner = _two_levels(store, ran)
    pending, _out, _ = await events_of(outer(prompt="release", run_id="rel"))
    result = await outer(
        parent_id="rel", resume={pending[0].interaction_id: Cancel("not today")}
    ).collect()
    assert (result.status.code, result.status.reason) == ("cancelled", "cancelled")
    assert result.status.message == "not today" and ran == []
    saved = await store.load_run("rel")
    assert saved is not None
    ((_call_id, mid_paused),) = saved.nested.items()
    mid_run = await store.load_run(mid_paused.run_id)
    assert mid_run is not None and mid_run.resumed_by is not None
    mid_cancel = await store.load_run(mid_run.resumed_by)
    assert mid_cancel is not None and (mid_cancel.status, mid_cancel.message) == (
        "cancelled",
        "not today",
    )
    ((_, inner_paused),) = mid_run.nested.items()
    inner_run = await store.load_run(inner_paused.run_id)
    assert inner_run is not None and inner_run.resumed_by is not None
    inner_cancel = await store.load_run(inner_run.resumed_by)
    assert inner_cancel is not None and inner_cancel.status == "cancelled"
    assert inner_cancel.transcript[-2:] == [
        {"role": "tool", "tool_call_id": c.tool_call_id, "content": "Cancelled: not today"}
        for c in inner_run.pending_calls
    ]
    assert (_calls(outer), _calls(mid), _calls(inner)) == (1, 1, 1)


async def test_the_json_cancel_reaches_the_inner_run(store: Store) -> None:
    inner = _agent(store, "inner", script(ASK), [ask_user])
    outer = _outer(store, inner)
    (p,), out, _ = await events_of(outer(prompt="q"))
    cancel = {"type": "cancel", "reason": "expired"}
    result = await outer(parent_id=out.run_id, resume={p.interaction_id: cancel}).collect()
    assert result.status.reason == "cancelled" and result.status.message == "expired"
    saved = await store.load_run(out.run_id)
    assert saved is not None
    (inner_paused,) = saved.nested.values()
    inner_run = await store.load_run(inner_paused.run_id)
    assert inner_run is not None and inner_run.resumed_by is not None


async def test_parallel_calls_to_one_inner_agent_are_separate_runs(store: Store) -> None:
    inner = _agent(store, "inner", script(ASK), [ask_user])
    call = {"name": "inner", "arguments": {"prompt": "same"}}
    outer = _agent(store, "outer", script(call, call), [inner])
    (a, b), out, _ = await events_of(outer(prompt="q"))
    assert a.payload == b.payload and a.interaction_id != b.interaction_id
    (b_again,), out2, _ = await events_of(
        outer(parent_id=out.run_id, resume={a.interaction_id: "postgres"})
    )
    assert b_again.interaction_id == b.interaction_id
    result = await outer(parent_id=out2.run_id, resume={b.interaction_id: "mysql"}).collect()
    assert result.output == "done: done: postgres | done: mysql"
    assert _calls(inner) == 4  # two runs, two steps each


async def test_parallel_questions_inside_the_inner_agent_resume_one_by_one(store: Store) -> None:
    other = {"name": "ask_user", "arguments": {"question": "Which region?"}}
    inner = _agent(store, "inner", script(ASK, other), [ask_user])
    outer = _outer(store, inner)
    (db, region), out, _ = await events_of(outer(prompt="q"))
    (left,), out2, _ = await events_of(
        outer(parent_id=out.run_id, resume={region.interaction_id: "eu"})
    )
    assert left.interaction_id == db.interaction_id
    result = await outer(parent_id=out2.run_id, resume={db.interaction_id: "pg"}).collect()
    assert result.output == "done: done: eu | pg" and _calls(inner) == 2


async def test_a_denied_approval_inside_the_inner_agent(store: Store) -> None:
    ran: list[str] = []

    def drop(table: str) -> str:
        ran.append(table)
        return "dropped"

    inner_fn = script({"name": "drop", "arguments": {"table": "users"}})
    inner = _agent(store, "inner", inner_fn, [Tool(drop, requires_approval=True)])
    outer = _outer(store, inner)
    (p,), out, _ = await events_of(outer(prompt="q"))
    assert p.kind == "approval" and p.runnable_path == "outer.inner.drop"
    assert p.payload["arguments_schema"]["required"] == ["table"]
    deny = {"approved": False, "reason": "prod"}
    result = await outer(parent_id=out.run_id, resume={p.interaction_id: deny}).collect()
    assert result.output == "done: done: Denied: prod" and ran == []


async def test_an_approval_on_the_agent_tool_gates_the_whole_inner_run(store: Store) -> None:
    inner = _agent(store, "inner", lambda m: "pong", [])
    outer = _agent(
        store,
        "outer",
        script({"name": "inner", "arguments": {"prompt": "hi"}}),
        [inner.as_tool(requires_approval=True)],
    )
    (p,), out, _ = await events_of(outer(prompt="q"))
    assert p.runnable_path == "outer.inner" and _calls(inner) == 0
    result = await outer(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert result.output == "done: pong" and _calls(inner) == 1


async def test_a_retried_resume_keeps_the_inner_idempotency_key(store: Store) -> None:
    keys: list[str] = []

    def charge(amount: int) -> str:
        keys.append(current_call().idempotency_key)
        if len(keys) == 1:
            raise Crash
        return f"charged {amount}"

    def note() -> str:
        keys.append(current_call().idempotency_key)
        return "noted"

    def build() -> Agent:
        inner_fn = script({"name": "charge", "arguments": {"amount": 5}})
        tool = Tool(charge, requires_approval=True, idempotent=True)
        inner = _agent(store, "inner", inner_fn, [tool])
        calls = ({"name": "inner", "arguments": {"prompt": "pay"}}, {"name": "note"})
        return _agent(store, "outer", script(*calls), [inner, note])

    outer = build()
    (p,), _out, _ = await events_of(outer(prompt="q", run_id="job"))
    outer_key = keys.pop()
    with pytest.raises(Crash):
        await outer(parent_id="job", resume={p.interaction_id: True}, run_id="job-r").collect()
    outer = build()  # the process restarted
    result = await outer(parent_id="job", resume={p.interaction_id: True}, run_id="job-r").collect()
    assert result.output == "done: noted | done: charged 5"
    first, second = keys
    assert first == second and first.startswith("job-r/") and first != outer_key
    assert outer_key.startswith("job:")


async def test_a_retry_never_reruns_an_inner_call_that_may_have_taken_effect(
    store: Store,
) -> None:
    ran: list[str] = []

    def charge(amount: int) -> str:
        ran.append("charge")
        if len(ran) == 1:
            raise Crash
        return "charged"

    def build() -> Agent:
        inner_fn = script({"name": "charge", "arguments": {"amount": 5}})
        inner = _agent(store, "inner", inner_fn, [charge])
        return _outer(store, inner)

    with pytest.raises(Crash):
        await build()(prompt="q", run_id="w1").collect()
    result = await build()(prompt="q", run_id="w1").collect()
    assert result.output == f"done: done: {CRASHED}" and ran == ["charge"]


async def test_stopping_the_outer_task_stops_the_inner_run(store: Store) -> None:
    entered = asyncio.Event()

    async def slow() -> str:
        if not entered.is_set():  # only the first call hangs
            entered.set()
            await asyncio.Event().wait()
        return "fast"

    inner = _agent(store, "inner", script({"name": "slow"}), [slow])
    outer = _outer(store, inner)
    task = asyncio.ensure_future(outer(prompt="q", run_id="stop").collect())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    saved = await store.load_run("stop")
    assert saved is not None and (saved.status, saved.reason) == ("cancelled", "interrupted")
    call_id = saved.transcript[-1]["tool_call_id"]
    inner_saved = await store.load_run(f"stop/{call_id}")
    assert inner_saved is not None
    assert (inner_saved.status, inner_saved.reason) == ("cancelled", "interrupted")
    follow = await outer(prompt="again", parent_id="stop").collect()
    assert follow.status.code == "success" and follow.output == "done: done: fast"


async def test_an_inner_error_is_the_tool_result(store: Store) -> None:
    def broken(messages: list[dict[str, Any]]) -> Any:
        raise RuntimeError("model down")

    inner = _agent(store, "inner", broken, [])
    outer = _outer(store, inner)
    result = await outer(prompt="q").collect()
    assert result.status.code == "success"
    assert result.output == "done: Error: agent `inner` ended `error/exception`: " + (
        "RuntimeError: model down"
    )


async def test_a_handler_suspending_twice_inside_the_inner_agent(store: Store) -> None:
    def two_step() -> str:
        first = suspend({"q": "first?"}, kind="ask_user")
        second = suspend({"q": "second?"}, kind="ask_user")
        return f"{first}+{second}"

    inner = _agent(store, "inner", script({"name": "two_step"}), [two_step])
    outer = _outer(store, inner)
    (p1,), out, _ = await events_of(outer(prompt="q"))
    (p2,), out2, _ = await events_of(outer(parent_id=out.run_id, resume={p1.interaction_id: 1}))
    assert p2.payload == {"q": "second?"}
    result = await outer(parent_id=out2.run_id, resume={p2.interaction_id: 2}).collect()
    assert result.output == "done: done: 1+2"


async def test_a_new_message_cancels_the_inner_run_it_supersedes(store: Store) -> None:
    inner = _agent(store, "inner", script(ASK), [ask_user])
    outer = _outer(store, inner)
    (_p,), _out, _ = await events_of(outer(prompt="q", run_id="first"))
    saved = await store.load_run("first")
    assert saved is not None
    (inner_paused,) = saved.nested.values()
    follow = await outer(prompt="never mind", parent_id="first", run_id="second").collect()
    assert follow.status.reason == "input_required"  # the model asked the inner agent again
    inner_run = await store.load_run(inner_paused.run_id)
    assert inner_run is not None and inner_run.resumed_by is not None
    ended = await store.load_run(inner_run.resumed_by)
    assert ended is not None and (ended.status, ended.message) == ("cancelled", "superseded")


async def test_cancel_ends_the_outer_run_even_when_the_inner_one_cannot_be_resumed(
    store: Store,
) -> None:
    inner = _agent(store, "inner", script(ASK), [ask_user])
    (p,), _, _ = await events_of(_outer(store, inner)(prompt="q", run_id="old"))
    # After a deploy, the tool `inner` is backed by another agent, which may not resume the
    # paused inner run (it belongs to agent `inner`): the cancel is refused down there.
    other = _agent(store, "other", script(ASK), [ask_user]).as_tool()
    other.name = "inner"
    outer = _agent(store, "outer", script(), [other])
    result = await outer(parent_id="old", resume={p.interaction_id: Cancel("stop")}).collect()
    assert (result.status.code, result.status.reason) == ("cancelled", "cancelled")
