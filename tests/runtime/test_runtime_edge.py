"""Edge cases of the runtime: odd handlers, odd models, odd answers, and misuse of the API."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from pydantic import BaseModel

from bot import (
    Agent,
    Cancel,
    InvalidResumeValue,
    RunAlreadyResumed,
    Tool,
    UnknownInteraction,
    UsageError,
    suspend,
)
from bot._model import ModelResponse, ToolCall
from bot.events import InteractionEvent, OutputEvent, StartEvent, event_adapter
from bot.testing import FunctionModel, OpenAICompatServer
from bot.tools import ask_user, confirm
from state import Store, open_store

from .conftest import events_of, last_tool_results, make_agent, script


def assert_every_call_answered(messages: list[dict[str, Any]]) -> None:
    """What a hosted model insists on: every tool call has exactly one result, ids unique."""
    call_ids = [c["id"] for m in messages if m.get("tool_calls") for c in m["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert len(call_ids) == len(set(call_ids)), call_ids
    assert sorted(call_ids) == sorted(result_ids)


# Handlers and models: sync, async, threads ---------------------------------------------------


async def test_async_handler_and_async_model(store: Store) -> None:
    async def lookup(host: str) -> str:
        await asyncio.sleep(0)  # the scope must survive an await
        answer = suspend({"host": host}, kind="ask_user")
        await asyncio.sleep(0)
        return f"{host}={answer}"

    async def fn(messages: list[dict[str, Any]]) -> Any:
        await asyncio.sleep(0)
        if messages[-1]["role"] == "user":
            return [{"name": "lookup", "arguments": {"host": "db1"}}]
        return "got " + last_tool_results(messages)[0]

    agent = make_agent(store, fn, [lookup])
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload == {"host": "db1"} and out.status.reason == "input_required"
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "up"}).collect()
    assert result.output == "got db1=up"


async def test_sync_suspend_from_a_worker_thread(store: Store) -> None:
    def blocking_part() -> str:
        return str(suspend({"q": "from a thread"}))

    async def threaded() -> str:
        # to_thread copies the context, so a blocking helper may suspend too.
        return await asyncio.to_thread(blocking_part)

    agent = make_agent(store, script({"name": "threaded", "arguments": {}}), [threaded])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "ok"}).collect()
    assert result.output == "done: ok"


async def test_handler_raises_after_its_answer(store: Store) -> None:
    def picky() -> str:
        answer = suspend({"q": "size?"})
        raise ValueError(f"cannot use {answer!r}")

    agent = make_agent(store, script({"name": "picky", "arguments": {}}), [picky])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "huge"}).collect()
    assert result.status.code == "success"
    assert result.output == "done: Error: tool `picky` failed: ValueError: cannot use 'huge'"


async def test_suspend_again_with_a_payload_built_from_the_first_answer(store: Store) -> None:
    seen: list[Any] = []

    def wizard() -> str:
        env = suspend({"q": "env?"}, kind="ask_user")
        seen.append(env)
        region = suspend({"q": f"region for {env}?"}, kind="ask_user")
        return f"{env}/{region}"

    agent = make_agent(store, script({"name": "wizard", "arguments": {}}), [wizard])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    (p2,), out2, _ = await events_of(
        agent(parent_id=out1.run_id, resume={p1.interaction_id: "prod"})
    )
    assert p2.payload == {"q": "region for prod?"} and p2.interaction_id != p1.interaction_id
    assert p2.tool_call_id == p1.tool_call_id
    saved = await store.load_run(out2.run_id)
    assert saved is not None and saved.answers == {p1.interaction_id: "prod"}
    # The first answer is not asked for again and not accepted again.
    with pytest.raises(UnknownInteraction):
        await agent(parent_id=out2.run_id, resume={p1.interaction_id: "dev"}).collect()
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "eu"}).collect()
    assert result.output == "done: prod/eu"
    assert seen == ["prod", "prod"]


# Ids across steps and from models that reuse or omit them -----------------------------------


async def test_same_tool_in_consecutive_steps_gets_fresh_ids(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        answered = [m for m in messages if m["role"] == "tool"]
        if len(answered) < 2:
            return [{"name": "ask_user", "arguments": {"question": "Same question?"}}]
        return "answers: " + ", ".join(m["content"] for m in answered)

    agent = make_agent(store, fn, [ask_user])
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    # Step 1 completes and the model asks the very same question again: a new call, a new id,
    # and the previous step's answer does not answer it.
    (p2,), out2, _ = await events_of(agent(parent_id=out1.run_id, resume={p1.interaction_id: "a"}))
    assert out2.status.reason == "input_required"
    assert p2.payload == p1.payload
    assert p2.tool_call_id != p1.tool_call_id
    assert p2.interaction_id != p1.interaction_id
    saved = await store.load_run(out2.run_id)
    assert saved is not None and saved.answers == {}
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "b"}).collect()
    assert result.output == "answers: a, b"


class FixedIdModel:
    """A server that sends `call_0` on every turn, or no id at all (some do both)."""

    name = "fixed-ids"

    def __init__(self, steps: list[list[tuple[str, dict[str, Any]]]], ids: list[str]) -> None:
        self.steps = steps
        self.ids = ids
        self.seen: list[list[dict[str, Any]]] = []

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        self.seen.append(list(messages))
        step = sum(1 for m in messages if m["role"] == "assistant")
        if step >= len(self.steps):
            yield ModelResponse(text=" | ".join(last_tool_results(messages)))
            return
        yield ModelResponse(
            tool_calls=[
                ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))
                for call_id, (name, arguments) in zip(self.ids, self.steps[step], strict=False)
            ]
        )


async def test_model_reusing_a_tool_call_id_across_steps(store: Store) -> None:
    question = ("ask_user", {"question": "Again?"})
    model = FixedIdModel([[question], [question]], ids=["call_0"])
    agent = Agent(name="assistant", model=model, tools=[ask_user], store=store)
    (p1,), out1, _ = await events_of(agent(prompt="x"))
    (p2,), out2, _ = await events_of(agent(parent_id=out1.run_id, resume={p1.interaction_id: "a"}))
    assert p2.interaction_id != p1.interaction_id
    assert p2.tool_call_id != p1.tool_call_id
    result = await agent(parent_id=out2.run_id, resume={p2.interaction_id: "b"}).collect()
    assert result.output == "b"
    assert_every_call_answered(model.seen[-1])


async def test_model_sending_no_tool_call_ids(store: Store) -> None:
    question = ("ask_user", {"question": "Which?"})
    model = FixedIdModel([[question, question]], ids=["", ""])
    agent = Agent(name="assistant", model=model, tools=[ask_user], store=store)
    (a, b), out, _ = await events_of(agent(prompt="x"))
    assert a.tool_call_id and b.tool_call_id and a.tool_call_id != b.tool_call_id
    assert a.interaction_id != b.interaction_id
    result = await agent(
        parent_id=out.run_id, resume={a.interaction_id: "1", b.interaction_id: "2"}
    ).collect()
    assert result.output == "1 | 2"
    assert_every_call_answered(model.seen[-1])


# Parallel calls, partial resumes and Cancel -------------------------------------------------


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


# Answers and payloads ------------------------------------------------------------------------


async def test_non_json_answers_are_refused_and_json_ones_normalized(store: Store) -> None:
    seen: list[Any] = []

    def anything() -> str:
        seen.append(suspend({"q": "anything"}))
        return "ok"

    agent = make_agent(store, script({"name": "anything", "arguments": {}}), [anything])
    (p,), out, _ = await events_of(agent(prompt="x"))

    class Opaque:
        pass

    bad = [{1, 2}, Opaque(), math.nan, [math.inf], b"bytes", {"nested": Cancel()}]
    for value in bad:
        with pytest.raises(InvalidResumeValue, match="JSON data"):
            await agent(parent_id=out.run_id, resume={p.interaction_id: value}).collect()
    assert seen == []
    # A tuple and integer keys are JSON once encoded: the handler sees what the store keeps.
    await agent(parent_id=out.run_id, resume={p.interaction_id: ({1: "x"}, 2)}).collect()
    assert seen == [[{"1": "x"}, 2]]


async def test_tuple_answer_satisfies_an_array_schema(store: Store) -> None:
    def pick() -> str:
        answer = suspend({"q": "which?"}, response_schema={"type": "array", "minItems": 1})
        return f"{type(answer).__name__}:{answer}"

    agent = make_agent(store, script({"name": "pick", "arguments": {}}), [pick])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: ("api",)}).collect()
    assert result.output == "done: list:['api']"


async def test_huge_and_unicode_payloads_survive_the_store(store: Store) -> None:
    big = "ñandú 🦤 שלום " * 70_000  # about 1 MB of mixed scripts

    def show(title: str) -> str:
        return str(suspend({"title": title, "body": big, "emoji": "🚀"}, kind="ask_user"))

    agent = make_agent(store, script({"name": "show", "arguments": {"title": "Ünïcödé ✓"}}), [show])
    (p,), out, events = await events_of(agent(prompt="größe?"))
    for event in events:
        assert event_adapter.validate_json(event.model_dump_json()) == event
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.interactions[0].payload == p.payload
    assert saved.input == "größe?"
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "sí ✅"}).collect()
    assert result.output == "done: sí ✅"


async def test_suspend_payload_is_json_data(store: Store) -> None:
    when = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)

    def schedule() -> str:
        return str(suspend({"at": when, "hosts": ("a", "b")}))

    class Opaque:
        pass

    def broken() -> str:
        return str(suspend({"thing": Opaque()}))

    agent = make_agent(
        store,
        script({"name": "schedule", "arguments": {}}, {"name": "broken", "arguments": {}}),
        [schedule, broken],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert p.payload == {"at": "2030-01-02T03:04:05Z", "hosts": ["a", "b"]}
    assert event_adapter.validate_json(p.model_dump_json()) == p
    saved = await store.load_run(out.run_id)
    assert saved is not None and saved.interactions[0].payload == p.payload
    # An unstorable payload is the handler's error, reported to the model, not a lost run.
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "ok"}).collect()
    assert result.status.code == "success"
    assert "suspend() payload must be JSON data" in result.output


# Tools: return values and definitions -------------------------------------------------------


class Deployment(BaseModel):
    service: str
    replicas: int


@dataclasses.dataclass
class Report:
    ok: bool
    note: str


async def test_tool_return_values_reach_the_model_as_text(store: Store) -> None:
    values: dict[str, Any] = {
        "none": None,
        "dict": {"a": 1, "ü": "é"},
        "model": Deployment(service="api", replicas=3),
        "dataclass": Report(ok=True, note="fine"),
        "tuple": (1, 2),
        "text": "plain",
        "number": 4.5,
    }

    def give(kind: str) -> Any:
        return values[kind]

    seen: list[str] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": "give", "arguments": {"kind": k}} for k in values]
        seen.extend(last_tool_results(messages))
        return "ok"

    agent = make_agent(store, fn, [give])
    assert (await agent(prompt="x").collect()).status.code == "success"
    assert seen == [
        "null",
        '{"a": 1, "ü": "é"}',
        '{"service": "api", "replicas": 3}',
        '{"ok": true, "note": "fine"}',
        "[1, 2]",
        "plain",
        "4.5",
    ]


def test_tool_definitions_that_cannot_work_are_refused() -> None:
    def ok() -> str:
        return "ok"

    for bad_name in ["名前", "café", "has space", "dot.ted", "x" * 65]:
        with pytest.raises(UsageError, match="Tool name"):
            Tool(ok, name=bad_name)
    assert Tool(ok, name="x" * 64).name == "x" * 64
    with pytest.raises(UsageError, match="Tool name"):
        Tool(lambda: 1)  # `<lambda>`

    def star(*hosts: str) -> str:
        return ""

    def kwargs(**options: str) -> str:
        return ""

    def positional(host: str, /) -> str:
        return host

    def private(_host: str) -> str:
        return _host

    for handler, word in [
        (star, "args"),
        (kwargs, "kwargs"),
        (positional, "positional"),
        (private, "_host"),
    ]:
        with pytest.raises(UsageError, match=word):
            Tool(handler)

    def other() -> str:
        return "other"

    with pytest.raises(UsageError, match="two tools named `ok`"):
        Agent(name="a", model=FunctionModel(lambda m: ""), tools=[ok, Tool(other, name="ok")])


def test_parameter_names_that_shadow_basemodel_attributes(recwarn: pytest.WarningsRecorder) -> None:
    def tool(json: str, copy: bool = False) -> str:
        return json

    made = Tool(tool)
    assert made.parse_arguments('{"json": "x"}') == {"json": "x", "copy": False}
    assert not [w for w in recwarn if "shadows" in str(w.message)]


async def test_approval_answer_shape_is_strict(store: Store) -> None:
    def drop(table: str) -> str:
        return f"dropped {table}"

    agent = make_agent(
        store,
        script({"name": "drop", "arguments": {"table": "users"}}),
        [Tool(drop, requires_approval=True)],
    )
    (p,), out, _ = await events_of(agent(prompt="x"))
    # An unknown key may be a typo of `approved`; refusing it is safer than guessing.
    for bad in [{"approved": True, "extra": 1}, {"reason": "ok"}, {"approved": "yes"}, "true"]:
        with pytest.raises(InvalidResumeValue):
            await agent(parent_id=out.run_id, resume={p.interaction_id: bad}).collect()
    result = await agent(
        parent_id=out.run_id, resume={p.interaction_id: {"approved": True, "reason": "ok"}}
    ).collect()
    assert result.output == "done: dropped users"


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


# Continuations ------------------------------------------------------------------------------


async def test_continuation_from_an_error_run_and_from_a_success_run(store: Store) -> None:
    def fn(messages: list[dict[str, Any]]) -> Any:
        assert_every_call_answered(messages)
        if messages[-1]["role"] == "user" and messages[-1]["content"] == "boom":
            raise ConnectionError("model down")
        return "users: " + " / ".join(m["content"] for m in messages if m["role"] == "user")

    agent = make_agent(store, fn, [], system_prompt="be brief")
    failed = await agent(prompt="boom").collect()
    assert failed.status.code == "error"
    after_error = await agent(prompt="retry", parent_id=failed.run_id).collect()
    assert after_error.output == "users: boom / retry"
    # A finished run may be continued more than once: each continuation is its own branch.
    a = await agent(prompt="a", parent_id=after_error.run_id).collect()
    b = await agent(prompt="b", parent_id=after_error.run_id).collect()
    assert (a.output, b.output) == ("users: boom / retry / a", "users: boom / retry / b")


async def test_continuation_after_max_iterations_has_a_valid_transcript(store: Store) -> None:
    def again() -> str:
        return "again"

    def fn(messages: list[dict[str, Any]]) -> Any:
        assert_every_call_answered(messages)
        if messages[-1]["content"] == "stop":
            return "stopped"
        return [{"name": "again", "arguments": {}}]

    agent = make_agent(store, fn, [again], max_iterations=2)
    looped = await agent(prompt="loop").collect()
    assert looped.status.reason == "max_iterations"
    assert (await agent(prompt="stop", parent_id=looped.run_id).collect()).output == "stopped"


async def test_system_prompt_once_across_resumes_and_continuations(store: Store) -> None:
    seen: list[list[dict[str, Any]]] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        seen.append(messages)
        if messages[-1]["role"] == "user" and messages[-1]["content"].startswith("ask"):
            return [{"name": "ask_user", "arguments": {"question": "?"}}]
        return "ok"

    agent = make_agent(store, fn, [ask_user], system_prompt="You are terse.")
    (p,), out, _ = await events_of(agent(prompt="ask one"))
    resumed = await agent(parent_id=out.run_id, resume={p.interaction_id: "a"}).collect()
    (_,), paused, _ = await events_of(agent(prompt="ask two", parent_id=resumed.run_id))
    superseded = await agent(prompt="never mind", parent_id=paused.run_id).collect()
    await agent(prompt="thanks", parent_id=superseded.run_id).collect()
    assert len(seen) == 5
    for messages in seen:
        systems = [m for m in messages if m["role"] == "system"]
        assert systems == [{"role": "system", "content": "You are terse."}]
        assert messages[0] == systems[0]


async def test_max_iterations_is_a_budget_per_run(store: Store) -> None:
    def spin() -> str:
        return "spun"

    def fn(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return [{"name": "ask_user", "arguments": {"question": "go?"}}]
        return [{"name": "spin", "arguments": {}}]

    model = FunctionModel(fn)
    agent = Agent(name="a", model=model, tools=[ask_user, spin], store=store, max_iterations=2)
    (p,), out, _ = await events_of(agent(prompt="x"))
    assert model.calls == 1
    result = await agent(parent_id=out.run_id, resume={p.interaction_id: "yes"}).collect()
    # The resumed run gets its own two model calls; the parent's call is not counted.
    assert result.status.reason == "max_iterations" and model.calls == 3
    assert "after 2 model calls" in (result.status.message or "")


# Events, run objects and the store ----------------------------------------------------------


async def test_interaction_event_fields(store: Store) -> None:
    def deploy(service: str) -> str:
        return "deployed"

    agent = make_agent(
        store,
        script(
            {"name": "ask_user", "arguments": {"question": "when?"}},
            {"name": "deploy", "arguments": {"service": "api"}},
        ),
        [ask_user, Tool(deploy, requires_approval=True)],
    )
    _, out, events = await events_of(agent(prompt="x"))
    start = events[0]
    assert isinstance(start, StartEvent) and start.run_id == out.run_id
    saved = await store.load_run(out.run_id)
    assert saved is not None
    (assistant,) = [m for m in saved.transcript if m["role"] == "assistant"]
    call_ids = [c["id"] for c in assistant["tool_calls"]]
    question, approval = (e for e in events if isinstance(e, InteractionEvent))
    for event, name in [(question, "ask_user"), (approval, "deploy")]:
        assert event.type == "INTERACTION" and event.run_id == out.run_id
        assert event.path == "assistant"
        assert event.runnable_name == name
        assert event.runnable_path == f"assistant.{name}"
        assert event.runnable_type == "Tool"
        assert out.t0 <= event.t0 <= out.t1
        assert event.interaction_id.startswith("int_")
    assert [question.tool_call_id, approval.tool_call_id] == call_ids
    assert approval.payload["tool_call_id"] == approval.tool_call_id
    assert question.response_schema == {"type": "string", "minLength": 1}


async def test_a_run_object_runs_once(store: Store) -> None:
    calls: list[str] = []

    def act() -> str:
        calls.append("act")
        return "acted"

    model = FunctionModel(script({"name": "act", "arguments": {}}))
    agent = Agent(name="a", model=model, tools=[act], store=store)
    run = agent(prompt="x")
    events = [e async for e in run]
    # collect() after iterating gives that run's output; nothing runs again.
    assert await run.collect() is events[-1]
    assert await run.collect() is events[-1]
    assert calls == ["act"] and model.calls == 2
    with pytest.raises(UsageError, match="already started"):
        [e async for e in run]

    collected = agent(prompt="y")
    first = await collected.collect()
    assert await collected.collect() is first
    with pytest.raises(UsageError, match="already started"):
        collected.__aiter__()
    assert calls == ["act", "act"]


async def test_resume_run_object_collected_twice(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    run = agent(parent_id=out.run_id, resume={p.interaction_id: True})
    first = await run.collect()
    assert await run.collect() is first and first.status.code == "success"


async def test_stopping_at_the_first_interaction_still_saves_the_run(store: Store) -> None:
    call = {"name": "ask_user", "arguments": {"question": "q?"}}
    agent = make_agent(store, script(call, call), [ask_user])
    run = agent(prompt="x")
    iterator = run.__aiter__()
    first: InteractionEvent | None = None
    async for event in iterator:
        if isinstance(event, InteractionEvent):
            first = event
            break
    assert first is not None
    saved = await store.load_run(first.run_id)
    assert saved is not None and saved.status == "paused" and len(saved.interactions) == 2
    # The output is already known, and the caller may resume with the one id it saw.
    assert (await run.collect()).status.reason == "input_required"
    (second,), _, _ = await events_of(
        agent(parent_id=first.run_id, resume={first.interaction_id: "a"})
    )
    assert second.interaction_id == saved.interactions[1].interaction_id
    await iterator.aclose()  # type: ignore[attr-defined]


async def test_default_store_is_a_file_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HANDBACK_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    agent = Agent(
        name="a",
        model=FunctionModel(script({"name": "ask_user", "arguments": {"question": "?"}})),
        tools=[ask_user],
    )
    async with agent:
        (p,), out, _ = await events_of(agent(prompt="x"))
        result = await agent(parent_id=out.run_id, resume={p.interaction_id: "y"}).collect()
    assert (tmp_path / "handback.db").is_file()
    async with open_store(f"sqlite:///{tmp_path / 'handback.db'}") as reopened:
        saved = await reopened.load_run(result.run_id)
        assert saved is not None and saved.output == "done: y" and saved.parent_id == out.run_id
    # Closing is final for the store the agent opened; closing twice is fine.
    await agent.aclose()
    with pytest.raises(Exception, match="closed"):
        await agent(prompt="again").collect()


async def test_store_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HANDBACK_STORE", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    async with Agent(name="a", model=FunctionModel(lambda m: "hi")) as agent:
        assert (await agent(prompt="x").collect()).output == "hi"
    assert (tmp_path / "elsewhere.db").is_file() and not (tmp_path / "handback.db").exists()


async def test_a_store_passed_in_stays_open(store: Store) -> None:
    async with make_agent(store, lambda m: "hi", []) as agent:
        out = await agent(prompt="x").collect()
    assert (await store.load_run(out.run_id)) is not None


# Usage, and the local OpenAI-compatible server ------------------------------------------------


def _usage_of(fn: Any, messages: list[dict[str, Any]]) -> dict[str, int]:
    """What OpenAICompatServer reports for one request, recomputed from its inputs."""
    reply = fn(messages)
    text = reply if isinstance(reply, str) else ""
    prompt = sum(len(str(m.get("content") or "")) // 4 + 1 for m in messages)
    completion = len(text) // 4 + 1
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _sum(usages: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for usage in usages:
        for key, value in usage.items():
            total[key] = total.get(key, 0) + value
    return total


@pytest.mark.parametrize("stream", [True, False], ids=["streaming", "non-streaming"])
async def test_usage_is_the_sum_of_this_runs_model_calls(
    store: Store, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    def lookup() -> str:
        return "a fairly long tool result " * 10

    def fn(messages: list[dict[str, Any]]) -> Any:
        tools = [m for m in messages if m["role"] == "tool"]
        if not tools:
            return [{"name": "ask_user", "arguments": {"question": "which?"}}]
        if len(tools) == 1:
            return [{"name": "lookup", "arguments": {}}]
        return "the final answer, in several words"

    async with OpenAICompatServer(fn) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        agent = Agent(name="a", model="openai/m", tools=[ask_user, lookup], store=store)

        async def run(**kw: Any) -> OutputEvent:
            call = agent(**kw)
            if stream:
                return (await events_of(call))[1]
            return await call.collect()

        paused = await run(prompt="x")
        assert paused.usage == _sum([_usage_of(fn, r["messages"]) for r in server.requests])
        saved = await store.load_run(paused.run_id)
        assert saved is not None and saved.usage == paused.usage
        before = len(server.requests)
        result = await run(
            parent_id=paused.run_id, resume={saved.interactions[0].interaction_id: "x"}
        )
        # Two model calls in the resumed run; the parent's call is billed to the parent only.
        assert len(server.requests) == before + 2
        assert result.usage == _sum(
            [_usage_of(fn, r["messages"]) for r in server.requests[before:]]
        )
        assert result.output == "the final answer, in several words"


async def test_compat_server_refuses_bad_bodies() -> None:
    async with OpenAICompatServer(lambda m: "hi") as server, aiohttp.ClientSession() as http:
        url = f"{server.base_url}/chat/completions"
        for body in [
            b"{not json",
            b"[]",
            b'"text"',
            b"{}",
            b'{"messages": "hi"}',
            b'{"messages": [1]}',
        ]:
            async with http.post(url, data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 400, body
                error = (await r.json())["error"]
                assert error["type"] == "invalid_request_error" and "messages" in error["message"]
        assert server.requests == []
        ok = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        async with http.post(url, json=ok) as r:
            assert r.status == 200
            assert (await r.json())["choices"][0]["message"]["content"] == "hi"


async def test_streamed_tool_calls_without_index(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gemini's OpenAI-compatible stream leaves out `tool_calls[].index`; calls must not merge."""
    bodies: list[dict[str, Any]] = []

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        bodies.append(body)
        messages = body["messages"]
        if messages[-1]["role"] == "user":
            deltas: list[dict[str, Any]] = [
                {"tool_calls": [_call("fc-1", "lookup", '{"host": "db1"}')]},
                {"tool_calls": [_call("fc-2", "lookup", '{"host":')]},
                {"tool_calls": [{"function": {"arguments": ' "db2"}'}}]},
            ]
        else:
            deltas = [{"content": "hosts: " + " | ".join(last_tool_results(messages))}]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for delta in [*deltas, {}]:
            chunk = {
                "id": "gemini",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gemini",
                # Gemini also ends a tool-call turn with `stop`.
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": None if delta else "stop"}
                ],
            }
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    def lookup(host: str) -> str:
        return f"{host} up"

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local-test")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
        agent = Agent(name="a", model="openai/gemini", tools=[lookup], store=store)
        _, out, _ = await events_of(agent(prompt="check"))
        assert out.output == "hosts: db1 up | db2 up"
        calls = bodies[-1]["messages"][-3]["tool_calls"]
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [
            ("fc-1", '{"host": "db1"}'),
            ("fc-2", '{"host": "db2"}'),
        ]
    finally:
        await runner.cleanup()


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


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


async def test_approved_handler_that_then_suspends(store: Store) -> None:
    ran: list[str] = []

    def migrate(table: str) -> str:
        ran.append("start")
        mode = suspend({"q": f"how to migrate {table}?"}, kind="ask_user")
        return f"migrated {table} {mode}"

    agent = make_agent(
        store,
        script({"name": "migrate", "arguments": {"table": "users"}}),
        [Tool(migrate, requires_approval=True)],
    )
    (approval,), out1, _ = await events_of(agent(prompt="x"))
    (question,), out2, _ = await events_of(
        agent(parent_id=out1.run_id, resume={approval.interaction_id: True})
    )
    assert question.kind == "ask_user" and ran == ["start"]
    # The approval is kept along the chain: the second resume needs only the new answer.
    result = await agent(
        parent_id=out2.run_id, resume={question.interaction_id: "online"}
    ).collect()
    assert result.output == "done: migrated users online" and ran == ["start", "start"]


async def test_cancel_reason_is_text(store: Store) -> None:
    agent = make_agent(store, script({"name": "confirm", "arguments": {"action": "x"}}), [confirm])
    (p,), out, _ = await events_of(agent(prompt="x"))
    result = await agent(
        parent_id=out.run_id,
        resume={p.interaction_id: Cancel(404)},  # type: ignore[arg-type]
    ).collect()
    assert result.status.message == "404"


async def test_schema_formats_are_enforced_server_side(store: Store) -> None:
    """`format` is validated on resume (jsonschema with its format extras), not just advice."""

    def ask_site() -> str:
        return str(
            suspend(
                {"question": "Which URL?"},
                kind="ask_user",
                response_schema={"type": "string", "format": "uri"},
            )
        )

    agent = make_agent(store, script({"name": "ask_site", "arguments": {}}), [ask_site])
    (p,), out, _ = await events_of(agent(prompt="x"))
    with pytest.raises(InvalidResumeValue, match="uri"):
        await agent(parent_id=out.run_id, resume={p.interaction_id: "not a uri"}).collect()
    result = await agent(
        parent_id=out.run_id, resume={p.interaction_id: "https://example.com/x"}
    ).collect()
    assert result.output == "done: https://example.com/x"
