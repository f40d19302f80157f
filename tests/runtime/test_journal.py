"""The tool journal: a run whose process died while tools ran is continued, and a call that may
have taken effect is never silently run twice.

`Crash` (a `BaseException`) stands for the process dying where it is raised: the run is left in
the store as its journal last saved it. test_crash_process.py does the same with a real SIGKILL.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from bot import RunNotPaused, Tool, current_call
from bot.events import OutputEvent
from bot.tools import ask_user
from state import RunRecord, StopGuard, Store

from .conftest import CountingStore, Crash, events_of, last_tool_results, make_agent, script

CRASHED = "Interrupted: the process stopped while this ran; it may or may not have taken effect."


def _crashing_once(ran: list[str]) -> Any:
    """A handler that records each run (and its idempotency key) and dies the first time."""

    def charge(amount: int) -> str:
        ran.append(current_call().idempotency_key)
        if len(ran) == 1:
            raise Crash
        return f"charged {amount}"

    return charge


async def _crash(run: Any) -> None:
    with pytest.raises(Crash):
        await run.collect()


async def test_a_call_that_started_is_not_run_again(store: Store) -> None:
    ran: list[str] = []
    agent = make_agent(
        store, script({"name": "charge", "arguments": {"amount": 5}}), [_crashing_once(ran)]
    )
    await _crash(agent(prompt="x", run_id="job-1"))
    saved = await store.load_run("job-1")
    assert saved is not None and saved.status == "running"
    assert saved.started == [saved.pending_calls[0].tool_call_id] and saved.results == {}

    result = await agent(prompt="x", run_id="job-1").collect()
    assert result.status.code == "success" and result.output == f"done: {CRASHED}"
    assert len(ran) == 1  # the model saw the interruption; nothing ran twice
    assert agent.model.calls == 2  # type: ignore[attr-defined]


async def test_an_idempotent_call_runs_again_with_the_same_key(store: Store) -> None:
    ran: list[str] = []
    tool = Tool(_crashing_once(ran), name="charge", idempotent=True)
    agent = make_agent(store, script({"name": "charge", "arguments": {"amount": 5}}), [tool])
    await _crash(agent(prompt="x", run_id="job-2"))
    result = await agent(prompt="x", run_id="job-2").collect()
    assert result.output == "done: charged 5"
    saved = await store.load_run("job-2")
    assert saved is not None
    call_id = saved.transcript[-3]["tool_calls"][0]["id"]
    assert ran == [f"job-2:{call_id}", f"job-2:{call_id}"]
    assert agent.model.calls == 2  # type: ignore[attr-defined]


async def test_a_call_that_returned_keeps_its_saved_result(store: Store) -> None:
    ran: list[str] = []

    def fast() -> str:
        ran.append("fast")
        return "fast result"

    async def slow() -> str:
        ran.append("slow")
        # Die only once the sibling's result is in the store, as a process may.
        run_id = current_call().run_id
        while True:
            saved = await store.load_run(run_id)
            if saved is not None and "fast result" in saved.results.values():
                break
            await asyncio.sleep(0.001)
        raise Crash

    fn = script({"name": "fast", "arguments": {}}, {"name": "slow", "arguments": {}})
    agent = make_agent(store, fn, [fast, slow])
    await _crash(agent(prompt="x", run_id="job-3"))
    result = await agent(prompt="x", run_id="job-3").collect()
    assert result.output == f"done: fast result | {CRASHED}"
    assert ran == ["fast", "slow"]


async def test_a_completed_step_is_not_run_again_after_a_crash_in_the_next(store: Store) -> None:
    ran: list[str] = []

    def first() -> str:
        ran.append("first")
        return "one"

    def second() -> str:
        ran.append("second")
        if ran.count("second") == 1:
            raise Crash
        return "two"

    def fn(messages: list[dict[str, Any]]) -> Any:
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not results:
            return [{"name": "first", "arguments": {}}]
        if len(results) == 1:
            return [{"name": "second", "arguments": {}}]
        return "done: " + " | ".join(results)

    agent = make_agent(store, fn, [first, second])
    await _crash(agent(prompt="x", run_id="job-4"))
    result = await agent(prompt="x", run_id="job-4").collect()
    assert result.output == f"done: one | {CRASHED}"
    assert ran == ["first", "second"]


async def test_a_crash_during_the_model_call_keeps_the_tool_results(store: Store) -> None:
    ran: list[str] = []
    turns: list[int] = []

    def tool() -> str:
        ran.append("tool")
        return "result"

    def fn(messages: list[dict[str, Any]]) -> Any:
        turns.append(len(messages))
        if messages[-1]["role"] == "user":
            return [{"name": "tool", "arguments": {}}]
        if len(turns) == 2:
            raise Crash
        return "done: " + last_tool_results(messages)[0]

    agent = make_agent(store, fn, [tool])
    await _crash(agent(prompt="x", run_id="job-5"))
    result = await agent(prompt="x", run_id="job-5").collect()
    assert result.output == "done: result" and ran == ["tool"]


async def test_a_retried_resume_continues_from_its_journal(store: Store) -> None:
    ran: list[str] = []
    tool = Tool(_crashing_once(ran), name="charge", requires_approval=True)
    agent = make_agent(store, script({"name": "charge", "arguments": {"amount": 9}}), [tool])
    (p,), paused, _ = await events_of(agent(prompt="x"))
    answer = {p.interaction_id: True}
    await _crash(agent(parent_id=paused.run_id, resume=answer, run_id="job-6"))
    result = await agent(parent_id=paused.run_id, resume=answer, run_id="job-6").collect()
    assert result.output == f"done: {CRASHED}" and len(ran) == 1


async def test_a_new_message_after_a_crash_continues_with_the_interruption(store: Store) -> None:
    ran: list[str] = []
    seen: list[list[str]] = []

    def fn(messages: list[dict[str, Any]]) -> Any:
        seen.append([str(m["content"]) for m in messages if m["role"] in ("tool", "user")])
        if len(seen) == 1:
            return [{"name": "charge", "arguments": {"amount": 1}}]
        return "ok"

    agent = make_agent(store, fn, [_crashing_once(ran)])
    await _crash(agent(prompt="charge me", run_id="job-7"))
    result = await agent(prompt="did it work?", parent_id="job-7").collect()
    assert result.output == "ok"
    assert seen[-1] == ["charge me", CRASHED, "did it work?"]


async def test_a_pure_tool_costs_no_journal_write(store: Store) -> None:
    counting = CountingStore(store)
    fn = script({"name": "ask_user", "arguments": {"question": "q?"}})
    agent = make_agent(counting, fn, [ask_user])  # type: ignore[arg-type]
    (p,), paused, _ = await events_of(agent(prompt="x"))
    assert counting.take() == ["save_run"]
    await agent(parent_id=paused.run_id, resume={p.interaction_id: "y"}).collect()
    # The resume's claim reads the parent with it: one call, then the end saved.
    assert counting.take() == ["claim_run", "save_run"]


@pytest.mark.parametrize("idempotent", [False, True])
async def test_an_approved_call_costs_a_write_before_and_after(
    store: Store, idempotent: bool
) -> None:
    counting = CountingStore(store)

    def deploy() -> str:
        return "deployed"

    tool = Tool(deploy, requires_approval=True, idempotent=idempotent)
    agent = make_agent(counting, script({"name": "deploy", "arguments": {}}), [tool])
    # The gate suspends before any handler code: only the pause is saved.
    (p,), paused, _ = await events_of(agent(prompt="x"))
    assert counting.take() == ["save_run"]
    await agent(parent_id=paused.run_id, resume={p.interaction_id: True}).collect()
    # The call is in the parent's record: a retry would run the same call, which an idempotent
    # tool allows, so its "started" write is skipped; the result is saved before the model turn.
    started = [] if idempotent else ["save_run"]
    assert counting.take() == ["claim_run", *started, "save_run", "save_run"]


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_call_from_a_fresh_model_turn_is_journaled(store: Store, idempotent: bool) -> None:
    counting = CountingStore(store)

    def read() -> str:
        return "read"

    tool = Tool(read, idempotent=idempotent)
    agent = make_agent(counting, script({"name": "read", "arguments": {}}), [tool])
    await agent(prompt="x").collect()
    # Even an idempotent call: a retry without the saved turn would ask the model again.
    assert counting.take() == ["save_run", "save_run", "save_run"]


class _WatchesTheMark:
    """The real store; where the save that marks a call started calls its `then` (the start),
    it notes how many turns the loop took since that save was asked for and whether the call's
    thread runs once `then` returns, and which store calls and tool lines come after."""

    def __init__(self, store: Store, seen: list[str]) -> None:
        self._store = store
        self.seen = seen
        self.turns = 0
        self.turns_to_mark = -1
        self.running_before = False
        self.running_after = False
        self.looked = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        if then is None:
            self.seen.append("save_run")
            return await self._store.save_run(run, stop=stop)
        asked = self.turns
        start = then
        # Primed before the mark is written: the call's thread is there, waiting to be woken.
        self.running_before = _tool_threads("deploy") > 0 and "deploy" not in self.seen

        def started() -> None:
            self.seen.append("marked")
            self.turns_to_mark = self.turns - asked
            start()
            threads = {t.name for t in threading.enumerate()}
            self.running_after = "handback-tool-deploy" in threads
            self.looked.set()

        return await self._store.save_run(run, stop=stop, then=started)


async def test_a_sync_call_is_started_where_its_started_mark_is_written(store: Store) -> None:
    """Between the "started" mark and the call there is nothing: not another store call, and not
    even a turn of the event loop since the save was asked for (the commit is made, and on
    Redis the script's reply read, on the loop's thread; on a busy loop a turn can outlast the
    write, and a kill in that gap would report interrupted a call that never began)."""
    seen: list[str] = []
    watching = _WatchesTheMark(store, seen)
    loop = asyncio.get_running_loop()
    ticking = True

    def tick() -> None:
        watching.turns += 1
        if ticking:
            loop.call_soon(tick)

    def deploy() -> str:
        watching.looked.wait(10)  # until the start has looked for this thread
        seen.append("deploy")
        return "deployed"

    tool = Tool(deploy, requires_approval=True)
    agent = make_agent(watching, script({"name": "deploy", "arguments": {}}), [tool])  # type: ignore[arg-type]
    (p,), paused, _ = await events_of(agent(prompt="x"))
    seen.clear()
    loop.call_soon(tick)
    try:
        result = await agent(parent_id=paused.run_id, resume={p.interaction_id: True}).collect()
    finally:
        ticking = False
    assert result.output == "done: deployed"
    assert seen == ["marked", "deploy", "save_run", "save_run"]
    assert watching.running_before and watching.running_after
    assert watching.turns_to_mark == 0


async def test_an_output_event_is_rebuilt_for_a_replay(store: Store) -> None:
    fn = script({"name": "ask_user", "arguments": {"question": "q?"}})
    agent = make_agent(store, fn, [ask_user])
    _, paused, _ = await events_of(agent(prompt="x", run_id="job-8"))
    again = await agent(prompt="x", run_id="job-8").collect()
    assert isinstance(again, OutputEvent) and again == paused


async def test_a_running_run_is_neither_claimable_nor_settled(store: Store) -> None:
    ran: list[str] = []
    agent = make_agent(
        store, script({"name": "charge", "arguments": {"amount": 5}}), [_crashing_once(ran)]
    )
    await _crash(agent(prompt="x", run_id="job-9"))
    claim = await store.claim_run("job-9", child_id="someone")
    assert not claim.won and claim.run is not None and claim.run.status == "running"
    assert "job-9" not in await store.settled_runs()
    with pytest.raises(RunNotPaused) as refused:
        await agent(parent_id="job-9", resume={"int_x": True}).collect()
    assert refused.value.status == "running"
    # Still continuable by its own id, and by nobody else's claim.
    assert (await agent(prompt="x", run_id="job-9").collect()).status.code == "success"


class _HoldsTheMark:
    """The real store, except that the save marking a call started waits for `release` before
    it is sent (`reached` is set when it gets there)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        if then is not None:
            self.reached.set()
            await self.release.wait()
        return await self._store.save_run(run, stop=stop, then=then)


async def test_a_run_stopped_while_its_started_mark_is_saved_says_the_call_never_started(
    store: Store,
) -> None:
    """The mark is written after the cancellation (it was on its way), but the handler never
    begins: the stopped run must not call it interrupted ("it may or may not have taken
    effect", which the thread is told) when it never ran."""
    ran: list[str] = []

    def deploy() -> str:
        ran.append("deploy")
        return "deployed"

    holding = _HoldsTheMark(store)
    tool = Tool(deploy, requires_approval=True)
    agent = make_agent(holding, script({"name": "deploy", "arguments": {}}), [tool])  # type: ignore[arg-type]
    (p,), paused, _ = await events_of(agent(prompt="x"))
    resume = agent(parent_id=paused.run_id, resume={p.interaction_id: True})
    task = asyncio.ensure_future(resume.collect())
    await holding.reached.wait()
    task.cancel()
    await asyncio.sleep(0)  # the run hears of it before the held save goes on
    holding.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    stored = await store.load_run(resume.run_id)
    assert ran == []
    assert stored is not None and stored.status == "cancelled"
    assert [call.outcome for call in resume.stopped_calls] == ["not_started"]
    # The thread primed for the call before the mark ended without calling it.
    _join_tool_threads("deploy")
    assert _tool_threads("deploy") == 0 and ran == []


def _tool_threads(tool: str) -> int:
    return sum(t.name == f"handback-tool-{tool}" for t in threading.enumerate())


def _join_tool_threads(tool: str) -> None:
    for thread in threading.enumerate():
        if thread.name == f"handback-tool-{tool}":
            thread.join(10)
