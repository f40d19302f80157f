"""Several calls in one step: answered, denied and cancelled each on its own, resumed in
parts, and `Cancel` carrying its reason as text."""

from __future__ import annotations

from typing import Any

import pytest

from bot import (
    Cancel,
    RunAlreadyResumed,
    Tool,
    UnknownInteraction,
    suspend,
)
from bot.tools import ask_user, confirm
from state import Store

from .conftest import (
    assert_every_call_answered,
    events_of,
    make_agent,
    script,
)


async def test_parallel_denied_approval_beside_a_question(store: Store) -> None:
    ran: list[str] = []

    def restart(service: str) -> str:
        ran.append(service)
        return "restarted"

    agent = make_agent(
        store,
        script(
            {"name": "restart", "arguments": {"service": "db"}},
            {"name": "ask_user", "arguments": {"question": "Why?"}},
        ),
        [Tool(restart, requires_approval=True), ask_user],
    )
    (approval, question), out, _ = await events_of(agent(prompt="x"))
    assert (approval.kind, question.kind) == ("approval", "ask_user")
    # Deny only: the question stays open with its id, and the handler never ran.
    (again,), out2, _ = await events_of(
        agent(
            parent_id=out.run_id,
            resume={approval.interaction_id: {"approved": False, "reason": "freeze"}},
        )
    )
    assert again.interaction_id == question.interaction_id
    assert again.t0 == question.t0  # still the moment it first asked
    result = await agent(
        parent_id=out2.run_id, resume={question.interaction_id: "slow queries"}
    ).collect()
    assert result.output == "done: Denied: freeze | slow queries"
    assert ran == []


async def test_cancel_one_interaction_of_a_multi_call_step(store: Store) -> None:
    runs = {"lookup": 0, "ask": 0}

    def lookup() -> str:
        runs["lookup"] += 1
        return "found"

    def ask(question: str) -> str:
        runs["ask"] += 1
        return str(suspend({"question": question}))

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "x":
            return [
                {"name": "lookup", "arguments": {}},
                {"name": "ask", "arguments": {"question": "one"}},
                {"name": "ask", "arguments": {"question": "two"}},
            ]
        assert_every_call_answered(messages)
        return " / ".join(m["content"] for m in messages if m["role"] == "tool")

    agent = make_agent(store, fn, [lookup, ask])
    (one, two), out, _ = await events_of(agent(prompt="x"))
    result = await agent(
        parent_id=out.run_id,
        resume={one.interaction_id: Cancel("wrong thread"), two.interaction_id: "B"},
    ).collect()
    assert result.status.code == "cancelled" and result.status.reason == "cancelled"
    assert result.status.message == "wrong thread"
    assert runs == {"lookup": 1, "ask": 2}  # nothing re-ran for a cancelled run
    saved = await store.load_run(result.run_id)
    assert saved is not None and saved.pending_calls == [] and saved.interactions == []
    follow = await agent(prompt="and now?", parent_id=result.run_id).collect()
    assert follow.output == "found / Cancelled: wrong thread / Cancelled: wrong thread"


async def test_confirm_answered_with_cancel(store: Store) -> None:
    agent = make_agent(
        store, script({"name": "confirm", "arguments": {"action": "drop"}}), [confirm]
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: Cancel()}).collect()
    assert (result.status.code, result.status.reason) == ("cancelled", "cancelled")
    assert result.output is None


async def test_partial_resume_of_three_then_old_ids_are_refused(store: Store) -> None:
    runs: dict[str, int] = {}

    def ask(question: str) -> str:
        runs[question] = runs.get(question, 0) + 1
        return str(suspend({"question": question}))

    agent = make_agent(
        store,
        script(*({"name": "ask", "arguments": {"question": q}} for q in ("a", "b", "c"))),
        [ask],
    )
    (a, b, c), out1, _ = await events_of(agent(prompt="x"))
    (c2,), out2, _ = await events_of(
        agent(parent_id=out1.run_id, resume={a.interaction_id: "A", b.interaction_id: "B"})
    )
    assert c2.interaction_id == c.interaction_id and c2.run_id == out2.run_id
    assert runs == {"a": 2, "b": 2, "c": 1}
    # The child waits for `c` only: the old parent's ids are not answers it takes.
    with pytest.raises(UnknownInteraction, match=c.interaction_id) as info:
        await agent(parent_id=out2.run_id, resume={a.interaction_id: "A2"}).collect()
    assert info.value.run_id == out2.run_id
    with pytest.raises(RunAlreadyResumed) as already:
        await agent(parent_id=out1.run_id, resume={c.interaction_id: "C"}).collect()
    assert already.value.resumed_by == out2.run_id
    result = await agent(parent_id=out2.run_id, resume={c.interaction_id: "C"}).collect()
    assert result.output == "done: A | B | C"
    assert runs == {"a": 2, "b": 2, "c": 2}


async def test_cancel_reason_is_text(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(
        parent_id=out.run_id,
        resume={p.interaction_id: Cancel(404)},  # type: ignore[arg-type]
    ).collect()
    assert result.status.message == "404"
