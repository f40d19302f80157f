"""The spec's rules for suspend and resume, each shown through the public API on both stores."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot import (
    Agent,
    Approval,
    Cancel,
    InvalidResumeValue,
    RunAlreadyResumed,
    RunNotFound,
    RunNotPaused,
    Tool,
    UnknownInteraction,
    UsageError,
    suspend,
)
from bot.events import DeltaEvent, OutputEvent, StartEvent, event_adapter
from bot.testing import FunctionModel
from bot.tools import ask_user, ask_user_multi, confirm
from state import Store

from .conftest import (
    events_of,
    make_agent,
    script,
)


async def test_ask_pause_resume_cycle(store: Store) -> None:
    fn = script(
        {
            "name": "ask_user",
            "arguments": {"question": "Which database?", "options": ["postgres", "mysql"]},
        }
    )
    agent = make_agent(store, fn, [ask_user])
    pending, out, events = await events_of(agent(prompt="set up my database"))
    assert isinstance(events[0], StartEvent)
    assert out.status.code == "cancelled" and out.status.reason == "input_required"
    assert [p.kind for p in pending] == ["ask_user"]
    assert pending[0].payload == {"question": "Which database?", "options": ["postgres", "mysql"]}
    assert pending[0].response_schema == {"type": "string", "enum": ["postgres", "mysql"]}
    assert pending[0].run_id == out.run_id and pending[0].tool_call_id
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.status == "paused"

    result = await agent(
        parent_id=out.run_id, resume={pending[0].interaction_id: "postgres"}
    ).collect()
    assert result.status.code == "success"
    assert result.output == "done: postgres"
    assert result.parent_id == out.run_id
    final = await store.load_run(result.run_id)
    assert final is not None and final.status == "success" and final.output == "done: postgres"


async def test_events_round_trip_through_json(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "confirm", "arguments": {"action": "drop"}}), [confirm]
    )
    _, _, events = await events_of(agent(prompt="go"))
    for event in events:
        assert event_adapter.validate_json(event.model_dump_json()) == event


async def test_streaming_emits_deltas(store: Store) -> None:
    agent = make_agent(store, lambda messages: "hello there", [])
    _, out, events = await events_of(agent(prompt="hi"))
    assert [e.text for e in events if isinstance(e, DeltaEvent)] == ["hello there"]
    assert out.output == "hello there" and out.status.code == "success"


async def test_ids_distinct_for_identical_parallel_calls(store: Store) -> None:
    call = {"name": "ask_user", "arguments": {"question": "Same?"}}
    agent = make_agent(store, script(call, call), [ask_user])
    pending, _, _ = await events_of(agent(prompt="x"))
    assert len(pending) == 2
    assert pending[0].interaction_id != pending[1].interaction_id
    assert pending[0].payload == pending[1].payload


async def test_ids_distinct_for_identical_suspends_in_one_handler(store: Store) -> None:
    def twice() -> str:
        first = suspend({"q": "same"}, kind="ask")
        second = suspend({"q": "same"}, kind="ask")
        return f"{first}+{second}"

    agent = make_agent(store, script({"name": "twice", "arguments": {}}), [twice])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    (p2,), out2, _ = await events_of(agent(parent_id=out1.run_id, resume={p1.interaction_id: "a"}))
    assert p1.interaction_id != p2.interaction_id
    # Rule 5: the second resume needs only the new answer.
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "b"}).collect()
    assert result.output == "done: a+b"


async def test_ids_are_deterministic_across_re_execution(store: Store) -> None:
    seen: list[str] = []

    def tool() -> str:
        return str(suspend({"q": 1}))

    agent = make_agent(store, script({"name": "tool", "arguments": {}}), [tool])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    seen.append(p1.interaction_id)
    run = await store.load_run(out1.run_id)
    assert run is not None and run.interactions[0].interaction_id == p1.interaction_id


async def test_resume_does_not_call_model_for_done_steps(store: Store) -> None:
    model = FunctionModel(script({"name": "ask_user", "arguments": {"question": "q?"}}))
    agent = Agent(name="a", model=model, tools=[ask_user], store=store)
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert model.calls == 1
    await agent(parent_id=out.run_id, resume={p.interaction_id: "yes"}).collect()
    assert model.calls == 2  # only the answer turn; the asking turn was not redone


async def test_completed_sibling_not_rerun_and_partial_resume(store: Store) -> None:
    runs: dict[str, int] = {"lookup": 0, "ask": 0}

    def lookup() -> str:
        runs["lookup"] += 1
        return "found"

    def ask(question: str) -> str:
        runs["ask"] += 1
        return str(suspend({"question": question}, kind="ask_user"))

    fn = script(
        {"name": "lookup", "arguments": {}},
        {"name": "ask", "arguments": {"question": "one"}},
        {"name": "ask", "arguments": {"question": "two"}},
    )
    model = FunctionModel(fn)
    agent = Agent(name="a", model=model, tools=[lookup, ask], store=store)
    pending, out, _ = await events_of(agent(prompt="x"))
    assert len(pending) == 2 and runs == {"lookup": 1, "ask": 2}
    one, two = pending
    # Answer only the first: it completes, the second pauses again with the same id.
    pending2, out2, _ = await events_of(
        agent(parent_id=out.run_id, resume={one.interaction_id: "A"})
    )
    assert [p.interaction_id for p in pending2] == [two.interaction_id]
    assert out2.status.reason == "input_required"
    assert runs == {"lookup": 1, "ask": 3}  # the unanswered handler was not re-run
    assert model.calls == 1  # the model waits until every call of the step has a result
    result = await agent(parent_id=out2.run_id, resume={two.interaction_id: "B"}).collect()
    assert result.output == "done: found | A | B"
    assert runs == {"lookup": 1, "ask": 4} and model.calls == 2


async def test_invalid_answer_rejected_and_run_stays_resumable(store: Store) -> None:
    def ask_age() -> int:
        return int(
            suspend(
                {"question": "age?"},
                kind="ask_user",
                response_schema={"type": "integer", "minimum": 0, "maximum": 130},
            )
        )

    handler_runs = 0

    def counted() -> int:
        nonlocal handler_runs
        handler_runs += 1
        return ask_age()

    agent = make_agent(
        store, script({"name": "ask_age", "arguments": {}}), [Tool(counted, name="ask_age")]
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    for bad in ["42", 200, -1, None, 4.5]:
        with pytest.raises(InvalidResumeValue, match=p.interaction_id) as info:
            await agent(parent_id=out.run_id, resume={p.interaction_id: bad}).collect()
        assert info.value.interaction_id == p.interaction_id
    assert handler_runs == 1
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.status == "paused" and saved.resumed_by is None
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: 42}).collect()
    assert result.output == "done: 42"


async def test_bad_resume_inputs_have_clear_errors(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    with pytest.raises(UnknownInteraction, match="int_nope"):
        await agent(parent_id=out.run_id, resume={"int_nope": True}).collect()
    with pytest.raises(RunNotFound, match="run_missing"):
        await agent(parent_id="run_missing", resume={p.interaction_id: True}).collect()
    with pytest.raises(UsageError, match="dict"):
        agent(parent_id=out.run_id, resume=[True])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="parent_id"):
        agent(resume={p.interaction_id: True})
    with pytest.raises(UsageError):
        agent()
    done = await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    with pytest.raises(RunNotPaused, match=done.run_id):
        await agent(parent_id=done.run_id, resume={p.interaction_id: True}).collect()


async def test_resumed_at_most_once_sequential(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    first = await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    with pytest.raises(RunAlreadyResumed) as info:
        await agent(parent_id=out.run_id, resume={p.interaction_id: False}).collect()
    assert info.value.resumed_by == first.run_id
    assert first.run_id in str(info.value)


async def test_concurrent_resumes_exactly_one_wins(store: Store) -> None:
    executed = 0

    def act() -> str:
        nonlocal executed
        answer = suspend({"go": True}, kind="confirm", response_schema={"type": "boolean"})
        executed += 1
        return f"did {answer}"

    agent = make_agent(store, script({"name": "act", "arguments": {}}), [act])
    (p,), out, _ = await events_of(agent(prompt="x"))
    results = await asyncio.gather(
        *(
            agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
            for _ in range(20)
        ),
        return_exceptions=True,
    )
    winners = [r for r in results if isinstance(r, OutputEvent)]
    losers = [r for r in results if isinstance(r, RunAlreadyResumed)]
    assert len(winners) == 1 and len(losers) == 19, results
    assert executed == 1
    assert {loser.resumed_by for loser in losers} == {winners[0].run_id}


async def test_cancel_ends_run_and_handler_never_sees_it(store: Store) -> None:
    seen: list[Any] = []

    def act() -> str:
        seen.append(suspend({"q": 1}))
        return "never"

    agent = make_agent(store, script({"name": "act", "arguments": {}}), [act])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(
        parent_id=out.run_id, resume={p.interaction_id: Cancel("changed my mind")}
    ).collect()
    assert result.status.code == "cancelled" and result.status.reason == "cancelled"
    assert result.status.message == "changed my mind"
    assert seen == []
    saved = await store.load_run(result.run_id)
    assert saved is not None and saved.status == "cancelled"


async def test_except_exception_does_not_swallow_pause(store: Store) -> None:
    def stubborn() -> str:
        try:
            return str(suspend({"q": "?"}))
        except Exception:
            return "swallowed"

    agent = make_agent(store, script({"name": "stubborn", "arguments": {}}), [stubborn])
    pending, out, _ = await events_of(agent(prompt="x"))
    assert out.status.reason == "input_required" and len(pending) == 1


async def test_approval_gate_runs_no_handler_code_before_approval(store: Store) -> None:
    ran: list[dict[str, Any]] = []

    def deploy(service: str, version: str, token: str) -> str:
        ran.append({"service": service})
        return f"deployed {service} {version}"

    tool = Tool(deploy, requires_approval=True)
    call = {"name": "deploy", "arguments": {"service": "api", "version": "2.3", "token": "s3cr3t"}}
    agent = make_agent(store, script(call), [tool])
    (p,), out, _ = await events_of(agent(prompt="ship it"))
    assert ran == []
    assert p.kind == "approval"
    assert p.payload == {
        "tool": "deploy",
        "arguments": {"service": "api", "version": "2.3", "token": "[redacted]"},
        "tool_call_id": p.tool_call_id,
        "arguments_schema": tool.parameters,
        "rule": Approval().to_json(),
    }
    assert "s3cr3t" not in out.model_dump_json() and "s3cr3t" not in p.model_dump_json()
    with pytest.raises(InvalidResumeValue):
        await agent(parent_id=out.run_id, resume={p.interaction_id: "yes"}).collect()
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert ran == [{"service": "api"}]
    assert result.output == "done: deployed api 2.3"


async def test_approval_denied_reaches_model_as_result(store: Store) -> None:
    ran: list[str] = []

    def restart(service: str) -> str:
        ran.append(service)
        return "restarted"

    agent = make_agent(
        store,
        script({"name": "restart", "arguments": {"service": "db"}}),
        [Tool(restart, requires_approval=True)],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(
        parent_id=out.run_id,
        resume={p.interaction_id: {"approved": False, "reason": "change freeze"}},
    ).collect()
    assert ran == [] and result.status.code == "success"
    assert result.output == "done: Denied: change freeze"


async def test_approval_rule_callable(store: Store) -> None:
    def scale(replicas: int) -> str:
        return f"scaled to {replicas}"

    tool = Tool(scale, requires_approval=lambda replicas: replicas > 10)
    agent = make_agent(store, script({"name": "scale", "arguments": {"replicas": 3}}), [tool])
    assert (await agent(prompt="x").collect()).output == "done: scaled to 3"
    agent = make_agent(store, script({"name": "scale", "arguments": {"replicas": 50}}), [tool])
    pending, out, _ = await events_of(agent(prompt="x"))
    assert pending[0].kind == "approval" and out.status.reason == "input_required"


async def test_confirm_rejects_non_booleans(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "confirm", "arguments": {"action": "drop db"}}), [confirm]
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload == {"action": "drop db"} and p.response_schema == {"type": "boolean"}
    for bad in ["no", "yes", 0, 1, None]:
        with pytest.raises(InvalidResumeValue):
            await agent(parent_id=out.run_id, resume={p.interaction_id: bad}).collect()
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: False}).collect()
    assert result.output == "done: false"


async def test_ask_user_options_and_multi(store: Store) -> None:
    agent = make_agent(
        store,
        script(
            {
                "name": "ask_user_multi",
                "arguments": {"question": "which?", "options": ["api", "web", "worker"]},
            }
        ),
        [ask_user_multi],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    for bad in [[], ["db"], ["api", "api"], "api"]:
        with pytest.raises(InvalidResumeValue):
            await agent(parent_id=out.run_id, resume={p.interaction_id: bad}).collect()
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: ["api", "web"]}).collect()
    assert result.output == 'done: ["api", "web"]'

    agent = make_agent(
        store,
        script({"name": "ask_user", "arguments": {"question": "env?", "options": ["dev", "prod"]}}),
        [ask_user],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    with pytest.raises(InvalidResumeValue):
        await agent(parent_id=out.run_id, resume={p.interaction_id: "staging"}).collect()


async def test_bad_tool_arguments_go_back_to_model(store: Store) -> None:
    def add(a: int, b: int) -> int:
        return a + b

    seen: list[str] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [
                {"name": "add", "arguments": {"a": "x", "b": 2}},
                {"name": "add", "arguments": "{not json"},
                {"name": "nope", "arguments": {}},
                {"name": "add", "arguments": {"a": 1, "b": 2, "c": 3}},
            ]
        seen.extend(m["content"] for m in messages if m["role"] == "tool")
        return "ok"

    agent = make_agent(store, fn, [add])
    result = await agent(prompt="x").collect()
    assert result.status.code == "success"
    assert "invalid arguments for tool `add`" in seen[0] and "`a`" in seen[0]
    assert "not valid JSON" in seen[1]
    assert "no tool `nope`" in seen[2]
    assert "`c`" in seen[3]


async def test_tool_exception_goes_back_to_model(store: Store) -> None:
    def boom() -> str:
        raise ValueError("disk full")

    agent = make_agent(store, script({"name": "boom", "arguments": {}}), [boom])
    result = await agent(prompt="x").collect()
    assert result.output == "done: Error: tool `boom` failed: ValueError: disk full"


async def test_suspend_outside_a_run() -> None:
    with pytest.raises(UsageError, match="outside"):
        suspend({"q": 1})


async def test_continue_conversation_and_supersede(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "user" and last["content"] == "ask me":
            return [{"name": "ask_user", "arguments": {"question": "color?"}}]
        if last["role"] == "user":
            return "transcript: " + " / ".join(
                str(m.get("content")) for m in messages if m["role"] in ("user", "tool")
            )
        return "answered " + last["content"]

    agent = make_agent(store, fn, [ask_user])
    first = await agent(prompt="hello").collect()
    second = await agent(prompt="again", parent_id=first.run_id).collect()
    assert second.output == "transcript: hello / again"
    (p,), paused, _ = await events_of(agent(prompt="ask me", parent_id=second.run_id))
    moved_on = await agent(prompt="never mind", parent_id=paused.run_id).collect()
    assert "Superseded" in moved_on.output and moved_on.output.endswith("never mind")
    with pytest.raises(RunAlreadyResumed):
        await agent(parent_id=paused.run_id, resume={p.interaction_id: "red"}).collect()


async def test_model_failure_ends_run_as_error(store: Store) -> None:
    def broken(messages: list[dict[str, Any]]) -> Any:
        raise ConnectionError("model down")

    agent = make_agent(store, broken, [])
    result = await agent(prompt="x").collect()
    assert result.status.code == "error" and "model down" in (result.error or "")
    saved = await store.load_run(result.run_id)
    assert saved is not None and saved.status == "error"


async def test_max_iterations(store: Store) -> None:
    def loop() -> str:
        return "again"

    agent = make_agent(
        store, lambda m: [{"name": "loop", "arguments": {}}], [loop], max_iterations=3
    )
    result = await agent(prompt="x").collect()
    assert result.status.code == "error" and result.status.reason == "max_iterations"


async def test_conversation_continues_after_cancel(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "x":
            return [{"name": "confirm", "arguments": {"action": "drop"}}]
        # Every tool call has its result: a hosted model would reject the transcript otherwise.
        call_ids = {c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]}
        result_ids = {m["tool_call_id"] for m in messages if m["role"] == "tool"}
        assert call_ids == result_ids
        return "tools: " + " / ".join(m["content"] for m in messages if m["role"] == "tool")

    agent = make_agent(store, fn, [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    cancelled = await agent(
        parent_id=out.run_id, resume={p.interaction_id: Cancel("expired")}
    ).collect()
    follow = await agent(prompt="what happened?", parent_id=cancelled.run_id).collect()
    assert follow.output == "tools: Cancelled: expired"


async def test_another_agent_cannot_resume_a_run(store: Store) -> None:
    call = {"name": "ask_user", "arguments": {"question": "?"}}
    first = make_agent(store, script(call), [ask_user])
    (p,), out, _ = await events_of(first(prompt="x"))
    other = Agent(name="other", model=FunctionModel(lambda m: "hello"), tools=[], store=store)
    with pytest.raises(UsageError, match="belongs to agent `assistant`"):
        await other(parent_id=out.run_id, resume={p.interaction_id: "y"}).collect()
    # Refused before the claim: the right agent still resumes it.
    done = await first(parent_id=out.run_id, resume={p.interaction_id: "y"}).collect()
    assert done.output == "done: y"
    # Continuing a conversation with another agent is a hand-over, and allowed.
    handed = await other(prompt="hi", parent_id=done.run_id).collect()
    assert handed.output == "hello" and handed.parent_id == done.run_id
