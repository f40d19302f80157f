"""The seed's framework (timbal): its `ask_user` tool and `TestModel`, with the in-memory tracing
provider (`memory`, its default without platform credentials) or `SqliteTracingProvider`
(`sqlite`), which is what a resume reads the paused run from.

    <venv>/bin/python bench/peers/timbal/driver.py --contender sqlite --measure cycle --n 200

As its documentation shows, the first call is iterated for events and the resume passes the
prompt again with `parent_id` and `resume`; a thread is continued with `parent_id`.

Every call starts from no run context (`set_run_context(None)`), as each request to timbal's
own server does (a task of its own). Without it, timbal 2.8 continues the run context the
previous call left in the task: a top-level call whose `parent_id` is None then takes the last
finished run as its parent (`parent_id=explicit_parent_id or run_context.id` in
`Runnable._stream`), so every "new" conversation of a loop of cycles would be the previous one
grown by two messages.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("TIMBAL_LOG_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _driver import (
    ANSWER,
    FINAL,
    HISTORY_REPLY,
    PROMPT,
    QUESTION,
    arguments,
    check_cycle,
    check_fresh,
    emit,
    history_prompt,
    is_history_prompt,
    saw_prompt,
    sqlite_payload_bytes,
    sqlite_setting,
    throughput,
    timed,
)
from timbal import Agent
from timbal.core import TestModel
from timbal.state import set_run_context
from timbal.state.tracing.providers import (
    InMemoryTracingProvider,
    SqliteTracingProvider,
)
from timbal.tools import ask_user
from timbal.types.content import TextContent, ToolUseContent
from timbal.types.events import InteractionEvent, OutputEvent
from timbal.types.message import Message

CONTENDERS = ("memory", "sqlite")

_calls = iter(range(10**9))


def script(messages: list[Any]) -> Any:
    last = messages[-1]
    first = last.content[0]
    if last.role == "tool" or not isinstance(first, TextContent):
        return "using " + first.content[0].text
    if is_history_prompt(first.text):
        return HISTORY_REPLY
    assert first.text == PROMPT, first
    saw_prompt(sum(m.role != "system" for m in messages))
    call = ToolUseContent(id=f"call_{next(_calls)}", name="ask_user", input=QUESTION)
    return Message(role="assistant", content=[call], stop_reason="tool_use")


class Contender:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="timbalcompare-")
        self.files = 0
        self.path = ""
        self.calls: Counter[str] = Counter()

    def provider(self) -> Any:
        if self.name == "memory":
            base: Any = InMemoryTracingProvider
            base._storage = {}
        else:
            self.files += 1
            self.path = str(Path(self.tmp) / f"traces{self.files}.db")
            base = SqliteTracingProvider.configured(_path=Path(self.path))
        calls = self.calls

        class Counted(base):  # type: ignore[misc,valid-type]
            @classmethod
            async def get(cls, run_context: Any) -> Any:
                calls["get"] += 1
                return await super().get(run_context)

            @classmethod
            async def _store(cls, run_context: Any) -> None:
                calls["store"] += 1
                await super()._store(run_context)

            @classmethod
            async def claim_approval(cls, *args: Any, **kwargs: Any) -> bool:
                calls["claim"] += 1
                return bool(await super().claim_approval(*args, **kwargs))

        return Counted

    def agent(self) -> tuple[Agent, TestModel]:
        model = TestModel(handler=script)
        agent = Agent(name="bench", model=model, tools=[ask_user], tracing_provider=self.provider())
        return agent, model

    def persists(self) -> str:
        if self.name == "memory":
            return "live trace objects in a process-wide dict"
        import sqlite3

        conn = sqlite3.connect(self.path)
        try:
            setting = sqlite_setting(conn)
        finally:
            conn.close()
        return f"a JSON trace per run, new connection per call (SQLite file, {setting})"


async def ask(agent: Agent, parent: str | None) -> tuple[list[InteractionEvent], str]:
    questions = []
    paused = None
    set_run_context(None)
    async for event in agent(prompt=PROMPT, parent_id=parent):
        if isinstance(event, InteractionEvent):
            questions.append(event)
        if isinstance(event, OutputEvent) and event.path == "bench":
            paused = event
    assert paused is not None
    return questions, paused.run_id


async def answer(agent: Agent, paused: str, questions: list[InteractionEvent]) -> str:
    set_run_context(None)
    done = await agent(
        prompt=PROMPT, parent_id=paused, resume={questions[0].interaction_id: ANSWER}
    ).collect()
    return str(done.output.collect_text())


async def cycle(agent: Agent, parent: str | None = None) -> None:
    questions, paused = await ask(agent, parent)
    if await answer(agent, paused, questions) != FINAL:
        raise AssertionError("a timed cycle did not end with the final answer")


async def check(
    c: Contender, agent: Agent, model: TestModel, parent: str | None = None, earlier: int = 0
) -> float:
    c.calls.clear()
    before = model.call_count
    questions, paused = await ask(agent, parent)
    output = await answer(agent, paused, questions)
    check_cycle(
        questions=len(questions),
        answers=1,
        output=output,
        model_calls=model.call_count - before,
        earlier=earlier,
    )
    assert questions[0].payload == QUESTION, questions[0].payload
    return float(sum(c.calls.values()))


async def thread(agent: Agent, messages: int) -> str | None:
    last = None
    for i in range(messages // 2):
        set_run_context(None)
        done = await agent(prompt=history_prompt(i), parent_id=last).collect()
        assert done.output.collect_text() == HISTORY_REPLY, done
        last = done.run_id
    return last


async def measure(c: Contender, args: Any) -> dict[str, Any]:
    if args.measure == "bytes":
        if c.name == "memory":
            raise SystemExit("timbal's memory provider keeps live objects: no bytes to count")
        result = {}
        for label, messages in (
            ("pending", 0),
            ("thread_2", 2),
            ("thread_20", 20),
            ("thread_200", 200),
        ):
            agent, _ = c.agent()
            if label == "pending":
                await ask(agent, None)
                check_fresh()
            else:
                await thread(agent, messages)
            result[label] = {"payload": sum(sqlite_payload_bytes(c.path).values())}
        return {"bytes": result}
    agent, model = c.agent()
    if args.measure == "resume":
        samples = {}
        for size in args.sizes:
            base = await thread(agent, size)
            await check(c, agent, model, base, earlier=size)

            async def asked(_: int, base: str | None = base) -> Any:
                return await ask(agent, base)

            async def resumed(asked: Any) -> None:
                if await answer(agent, asked[1], asked[0]) != FINAL:
                    raise AssertionError("a timed resume did not end with the final answer")

            samples[str(size)] = await timed(
                args.n,
                resumed,
                budget=args.budget / len(args.sizes),
                prepare=asked,
                warmup=5,
                earlier=size,
            )
        return {"samples": samples}
    store_calls = await check(c, agent, model)
    if args.measure == "cycle":
        samples = await timed(args.n, lambda _: cycle(agent), budget=args.budget)
        return {"samples": samples, "store_calls": store_calls}
    if args.measure == "throughput":
        return {"value": await throughput(args.concurrency, args.n, lambda _: cycle(agent))}
    raise SystemExit(f"timbal has no `{args.measure}` measure here")


async def main() -> None:
    args = arguments(CONTENDERS, __doc__ or "")
    c = Contender(args.contender)
    try:
        result = await measure(c, args)
        persists = c.persists()
    finally:
        shutil.rmtree(c.tmp, ignore_errors=True)
    emit(contender=f"timbal {c.name}", persists=persists, **result)


if __name__ == "__main__":
    asyncio.run(main())
