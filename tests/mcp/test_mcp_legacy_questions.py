"""The runtime's side of a question asked during the call (the older protocol), with a real SDK
server on 2025-11-25 over stdio and a real store: the process holding the call takes the answer
from the store, whoever recorded it there; with no place to ask (a run outside Slack) the
question is refused, never answered by guess; a stopped call closes its question."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot import Agent
from bot.mcp import MCPServer

# Private: the Slack app sets this around each turn; a test of the runtime alone stands in for it
from bot.mcp._live import live_questions
from bot.testing import FunctionModel
from state import InteractionRecord, PendingInteraction, Store, open_store

from ..conftest import answer_only
from ..runtime.conftest import events_of
from .conftest import Ops, ops_in, until

pytestmark = pytest.mark.slow

LEGACY_SERVER = str(Path(__file__).with_name("legacy_server.py"))


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'handback.db'}") as opened:
        yield opened


def _server(ops: Ops, **more: str) -> MCPServer:
    env = {"OPS_LOG": str(ops.log), "OPS_PID": str(ops.pid), **more}
    return MCPServer.stdio(
        "legacy", [sys.executable, LEGACY_SERVER], env=env, approvals={"*": False}
    )


def _agent(store: Store, server: MCPServer) -> Agent:
    def respond(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "tool":
            return f"Tool said: {messages[-1]['content']}"
        return [{"name": "legacy_pick", "arguments": {}}]

    return Agent(name="legacy", model=FunctionModel(respond), tools=[server], store=store)


async def _accept(store: Store, interaction_id: str, region: str) -> None:
    """Alice accepts the form with `region`, in the store, as another process taking her click
    would; the answer must win."""
    claim = await answer_only(
        store,
        interaction_id,
        answer={"action": "accept", "content": {"region": region}},
        answered_by="U0ALICE",
        now=time.time(),
    )
    assert claim.won


class Recorded:
    """Questions stored as the Slack app stores them, with no card: the test answers in the
    store, as another process taking the click would."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.asked: list[InteractionRecord] = []
        self.closed: list[tuple[str, str]] = []

    async def ask(self, interaction: PendingInteraction, *, run_id: str) -> None:
        now = time.time()
        [record] = await self.store.add_interactions(
            [
                InteractionRecord.placed(
                    interaction,
                    run_id=f"{run_id}:live",
                    channel="C0GENERAL",
                    thread_ts="1.000",
                    requester="U0ALICE",
                    requesters=["U0ALICE"],
                    created_at=now,
                    expires_at=now + 600,
                )
            ]
        )
        self.asked.append(record)

    async def completed(self, record: InteractionRecord) -> None:
        raise AssertionError("no URL question here")

    async def ended(self, interaction_id: str, *, why: str) -> None:
        await self.store.close_interaction(interaction_id, status="cancelled", now=time.time())
        self.closed.append((interaction_id, why))


async def test_the_holder_takes_the_answer_recorded_in_the_store(ops: Ops, store: Store) -> None:
    questions = Recorded(store)
    async with _server(ops) as server:
        token = live_questions.set(questions)
        try:
            running = asyncio.ensure_future(events_of(_agent(store, server)("pick")))
            await until(lambda: questions.asked)
            [asked] = questions.asked
            assert asked.payload["legacy"] is True and asked.payload["mode"] == "form"
            assert asked.payload["schema"]["properties"]["region"]["enum"] == ["eu", "us", "ap"]
            await _accept(store, asked.interaction_id, "ap")
            _, output, _ = await asyncio.wait_for(running, 30)
        finally:
            live_questions.reset(token)
    assert output.output == "Tool said: picked accept {'region': 'ap'}"
    assert questions.closed == []


async def test_a_stopped_call_closes_its_question(ops: Ops, store: Store) -> None:
    questions = Recorded(store)
    async with _server(ops) as server:
        token = live_questions.set(questions)
        try:
            running = asyncio.ensure_future(events_of(_agent(store, server)("pick")))
            await until(lambda: questions.asked)
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)
            # The server's session lives on; the question's waiter sees its call has ended.
            await until(lambda: questions.closed)
        finally:
            live_questions.reset(token)
    [asked] = questions.asked
    assert [iid for iid, _ in questions.closed] == [asked.interaction_id]
    stored = await store.get_interaction(asked.interaction_id)
    assert stored is not None and stored.status == "cancelled"


async def test_with_no_place_to_ask_the_question_is_refused(ops: Ops, store: Store) -> None:
    async with _server(ops) as server:
        _, output, _ = await events_of(_agent(store, server)("pick"))
    assert "Error:" in str(output.output)
    assert [c["phase"] for c in ops.calls("pick")] == ["asking", "refused"]  # never answered


async def test_with_two_calls_open_a_question_is_refused_not_guessed(
    ops: Ops, store: Store
) -> None:
    gate = ops.log.with_name("gate")
    questions = Recorded(store)
    async with _server(ops, LEGACY_GATE=str(gate)) as server:
        token = live_questions.set(questions)
        try:
            agent = _agent(store, server)
            runs = [asyncio.ensure_future(events_of(agent("pick", run_id=f"r{i}"))) for i in (1, 2)]
            await until(lambda: len(ops.calls("pick")) == 2)  # both calls open on the server
            gate.touch()
            outputs = [output for _, output, _ in await asyncio.wait_for(asyncio.gather(*runs), 30)]
        finally:
            live_questions.reset(token)
    # Nothing ties a question to one of them: neither is shown, both tools see a refusal,
    # also the one whose question arrived after the other call had ended (it was not alone
    # from its start).
    assert questions.asked == []
    assert all("Error:" in str(output.output) for output in outputs)
    assert [c["phase"] for c in ops.calls("pick")].count("refused") == 2


async def test_a_stopped_calls_question_never_reaches_the_next_call(ops: Ops, store: Store) -> None:
    gate = ops.log.with_name("gate")
    questions = Recorded(store)
    async with _server(ops, LEGACY_GATE=str(gate), LEGACY_STUBBORN="1") as server:
        token = live_questions.set(questions)
        try:
            agent = _agent(store, server)
            stopped = asyncio.ensure_future(events_of(agent("pick", run_id="r1")))
            await until(lambda: len(ops.calls("pick")) == 1)
            stopped.cancel()
            await asyncio.gather(stopped, return_exceptions=True)
            # The next call opens alone, and the stopped call's question arrives while it is
            # open: nothing says whose it is, so neither question is shown.
            following = asyncio.ensure_future(events_of(agent("pick", run_id="r2")))
            await until(lambda: len(ops.calls("pick")) == 2)
            gate.touch()
            _, output, _ = await asyncio.wait_for(following, 30)
            assert questions.asked == [] and "Error:" in str(output.output)
            await until(lambda: [c["phase"] for c in ops.calls("pick")].count("refused") == 2)
            # The server answered a call opened after the stopped one: nothing of it can
            # still arrive, so a call alone again gets its question shown.
            alone = asyncio.ensure_future(events_of(agent("pick", run_id="r3")))
            await until(lambda: questions.asked)
            [asked] = questions.asked
            await _accept(store, asked.interaction_id, "eu")
            _, output, _ = await asyncio.wait_for(alone, 30)
        finally:
            live_questions.reset(token)
    assert output.output == "Tool said: picked accept {'region': 'eu'}"
