"""LangGraph's contenders: the same cycle as a graph whose tool calls `interrupt()`, resumed with
`Command(resume=...)`, on `InMemorySaver` (`memory`) or `AsyncSqliteSaver` (`sqlite`).

    <venv>/bin/python bench/peers/langgraph/driver.py --contender sqlite --measure cycle --n 200

The graph is the standard tool loop (a model node, `ToolNode`, `tools_condition`) over
`MessagesState`; the model is a scripted `BaseChatModel`, so LangChain's model call path runs as
it would with a real provider. A resume uses the thread id, as LangGraph's documentation does.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

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
    throughput,
    timed,
)
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, interrupt

CONTENDERS = ("memory", "sqlite")

SAVER_CALLS = ("aget_tuple", "aput", "aput_writes", "alist", "aget_delta_channel_history")


class ScriptedModel(BaseChatModel):
    """The agreed script as a chat model: ask on the prompt, answer after the tool result."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        self.calls += 1
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content="using " + str(last.content))
        elif is_history_prompt(str(last.content)):
            reply = AIMessage(content=HISTORY_REPLY)
        else:
            assert last.content == PROMPT, last
            saw_prompt(sum(not isinstance(m, SystemMessage) for m in messages))
            call = {"name": "ask_user", "args": QUESTION, "id": f"call_{uuid.uuid4().hex[:16]}"}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@tool
def ask_user(question: str, options: list[str] | None = None) -> str:
    """Ask the user a clarifying question."""
    return str(interrupt({"question": question, "options": options}))


def build(model: ScriptedModel, saver: BaseCheckpointSaver[Any]) -> Any:
    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([ask_user]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver)


class Contender:
    def __init__(self, name: str) -> None:
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="lgcompare-")
        self.files = 0
        self.path = ""
        self.setting = "process memory"

    @asynccontextmanager
    async def saver(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        if self.name == "memory":
            yield InMemorySaver()
            return
        self.files += 1
        self.path = str(Path(self.tmp) / f"lg{self.files}.db")
        async with AsyncSqliteSaver.from_conn_string(self.path) as saver:
            await saver.setup()
            mode = await (await saver.conn.execute("PRAGMA journal_mode")).fetchone()
            sync = await (await saver.conn.execute("PRAGMA synchronous")).fetchone()
            level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[sync[0]]
            self.setting = f"SQLite file, {str(mode[0]).upper()}, synchronous={level}"
            yield saver

    def persists(self) -> str:
        return f"a checkpoint per graph step plus pending writes ({self.setting})"


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


async def ask(graph: Any, cfg: dict[str, Any]) -> list[Any]:
    state = await graph.ainvoke({"messages": [HumanMessage(PROMPT)]}, cfg)
    return list(state.get("__interrupt__", ()))


async def answer(graph: Any, thread: str) -> str:
    state = await graph.ainvoke(Command(resume=ANSWER), config(thread))
    return str(state["messages"][-1].content)


async def cycle(graph: Any, i: int) -> None:
    thread = f"t{i}-{uuid.uuid4().hex[:8]}"
    await ask(graph, config(thread))
    if await answer(graph, thread) != FINAL:
        raise AssertionError("a timed cycle did not end with the final answer")


async def check(
    graph: Any,
    model: ScriptedModel,
    saver: BaseCheckpointSaver[Any],
    base: dict[str, Any] | None = None,
    earlier: int = 0,
) -> float:
    """One cycle checked for the agreed work (in a new thread, or asked at checkpoint `base`
    of a thread of `earlier` messages); the saver calls it made."""
    calls: Counter[str] = Counter()
    for name in SAVER_CALLS:
        original = getattr(saver, name)

        def counted(*args: Any, _name: str = name, _original: Any = original, **kw: Any) -> Any:
            calls[_name] += 1
            return _original(*args, **kw)

        setattr(saver, name, counted)
    try:
        before = model.calls
        if base is None:
            thread = f"check-{uuid.uuid4().hex}"
            questions = await ask(graph, config(thread))
        else:
            thread = base["configurable"]["thread_id"]
            questions = await ask(graph, base)
        output = await answer(graph, thread)
    finally:
        for name in SAVER_CALLS:
            delattr(saver, name)
    check_cycle(
        questions=len(questions),
        answers=1,
        output=output,
        model_calls=model.calls - before,
        earlier=earlier,
    )
    assert questions[0].value == QUESTION, questions[0].value
    return float(sum(calls.values()))


async def thread_of(graph: Any, thread: str, messages: int) -> None:
    for i in range(messages // 2):
        state = await graph.ainvoke({"messages": [HumanMessage(history_prompt(i))]}, config(thread))
        assert state["messages"][-1].content == HISTORY_REPLY


def held_bytes(value: Any) -> int:
    """Bytes and characters held in nested containers (what `InMemorySaver` keeps)."""
    if isinstance(value, bytes | bytearray | str):
        return len(value)
    if isinstance(value, dict):
        return sum(held_bytes(k) + held_bytes(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return sum(held_bytes(v) for v in value)
    return 0


def saved_bytes(c: Contender, saver: BaseCheckpointSaver[Any]) -> int:
    if isinstance(saver, InMemorySaver):
        return held_bytes([dict(saver.storage), dict(saver.writes), dict(saver.blobs)])
    return sum(sqlite_payload_bytes(c.path).values())


async def measure(c: Contender, args: Any) -> dict[str, Any]:
    model = ScriptedModel()
    if args.measure == "bytes":
        result: dict[str, int] = {}
        for label, messages in (
            ("pending", 0),
            ("thread_2", 2),
            ("thread_20", 20),
            ("thread_200", 200),
        ):
            async with c.saver() as saver:
                graph = build(model, saver)
                empty = saved_bytes(c, saver)
                if label == "pending":
                    await ask(graph, config("bytes"))
                    check_fresh()
                else:
                    await thread_of(graph, "bytes", messages)
                result[label] = saved_bytes(c, saver) - empty
        return {"bytes": {k: {"payload": v} for k, v in result.items()}}
    async with c.saver() as saver:
        graph = build(model, saver)
        store_calls = await check(graph, model, saver)
        if args.measure == "cycle":
            samples = await timed(args.n, lambda i: cycle(graph, i), budget=args.budget)
            return {"samples": samples, "store_calls": store_calls}
        if args.measure == "throughput":
            return {"value": await throughput(args.concurrency, args.n, lambda i: cycle(graph, i))}
        if args.measure == "resume":
            budget = args.budget / len(args.sizes)
            return {
                "samples": {
                    str(size): await resume_samples(graph, model, saver, args.n, size, budget)
                    for size in args.sizes
                }
            }
    raise SystemExit(f"LangGraph has no `{args.measure}` measure here")


async def resume_samples(
    graph: Any,
    model: ScriptedModel,
    saver: BaseCheckpointSaver[Any],
    n: int,
    messages: int,
    budget: float,
) -> list[float]:
    """The thread is built once; each sample forks it at its last checkpoint (N earlier
    messages) and asks (untimed), then the resume alone is timed."""
    base = f"base-{uuid.uuid4().hex[:8]}"
    await thread_of(graph, base, messages)
    base_cfg = (await graph.aget_state(config(base))).config
    await check(graph, model, saver, base_cfg, earlier=messages)

    async def asked(_: int) -> None:
        questions = await ask(graph, base_cfg)
        assert len(questions) == 1, questions

    async def resumed(_: None) -> None:
        if await answer(graph, base) != FINAL:
            raise AssertionError("a timed resume did not end with the final answer")

    return await timed(n, resumed, budget=budget, prepare=asked, warmup=5, earlier=messages)


async def main() -> None:
    args = arguments(CONTENDERS, __doc__ or "")
    c = Contender(args.contender)
    try:
        result = await measure(c, args)
        persists = c.persists()
    finally:
        shutil.rmtree(c.tmp, ignore_errors=True)
    emit(contender=f"langgraph {c.name}", persists=persists, **result)


if __name__ == "__main__":
    asyncio.run(main())
