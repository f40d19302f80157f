"""A thread's transcript is stored once and grows by appending (layout 2), and runs saved before
that (layout 1: the whole transcript in each record, kept in fixtures/ as the previous code
wrote them) still resume, after which their thread continues in layout 2."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pydantic_core
import pytest
import redis.asyncio as aioredis

from bot import RunAlreadyResumed, Tool
from bot.tools import ask_user
from state import RedisStore, SQLiteStore, Store

# Raw keys and the database file: the test writes records as the previous layout did.
from ..state.conftest import raw_sqlite, redis_keys
from .conftest import Crash, events_of, make_agent, script

FIXTURES = Path(__file__).parent / "fixtures"
LAYOUT1 = ("layout1_success", "layout1_paused_approval")

EXECUTED: list[str] = []


def deploy(service: str, version: str) -> str:
    EXECUTED.append(f"{service} {version}")
    return f"deployed {service} {version}"


def thread_model(messages: list[dict[str, Any]]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return "done: " + last["content"]
    if last["content"] == "deploy api":
        return [{"name": "deploy", "arguments": {"service": "api", "version": "2.4"}}]
    return "Noted: " + last["content"]


async def write_raw(store: Store, url: str, run_id: str, status: str, rec: str) -> None:
    """Store a record exactly as the code before layout 2 wrote it."""
    if isinstance(store, SQLiteStore):
        with raw_sqlite(url) as conn:
            conn.execute(
                "INSERT INTO runs (run_id, status, resumed_by, rec, keep_until)"
                " VALUES (?, ?, NULL, ?, 1e12)",
                (run_id, status, rec),
            )
        conn.close()
        return
    assert isinstance(store, RedisStore)
    client = aioredis.Redis.from_url(url.split("?", 1)[0])
    try:
        key = redis_keys(store).run(run_id)
        await client.hset(key, mapping={"rec": rec, "status": status})
    finally:
        await client.aclose()


async def stored_bytes(store: Store, url: str) -> int:
    """The bytes of every value the store holds (SQLite: every column of every row; Redis:
    every hash field name and value, list and string value, sorted set member and score)."""
    if isinstance(store, SQLiteStore):
        total = 0
        with raw_sqlite(url) as conn:
            tables = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master"
                    " WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for table in tables:
                columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
                size = " + ".join(f'COALESCE(LENGTH(CAST("{c}" AS BLOB)), 0)' for c in columns)
                total += conn.execute(f'SELECT COALESCE(SUM({size}), 0) FROM "{table}"').fetchone()[
                    0
                ]
        conn.close()
        return int(total)
    assert isinstance(store, RedisStore)
    client = aioredis.Redis.from_url(url.split("?", 1)[0])
    total = 0
    try:
        async for key in client.scan_iter(match=f"{store.prefix}*"):
            kind = (await client.type(key)).decode()
            if kind == "hash":
                total += sum(len(k) + len(v) for k, v in (await client.hgetall(key)).items())
            elif kind == "zset":
                total += sum(len(m) + 8 for m in await client.zrange(key, 0, -1))
            elif kind == "string":
                total += int(await client.strlen(key))
            else:
                raise AssertionError(f"unexpected {kind} at {key!r}")
    finally:
        await client.aclose()
    return total


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.json").read_text()


def test_fixtures_are_the_format_of_before_layout_2() -> None:
    for name in LAYOUT1:
        data = json.loads(fixture(name))
        assert not {"layout", "transcript_id", "base"} & set(data), name
        assert data["transcript"] and data["id_scheme"] == 2


async def test_a_run_paused_in_layout_1_resumes_and_its_thread_continues(
    store: Store, store_url: str
) -> None:
    for name in LAYOUT1:
        data = json.loads(fixture(name))
        await write_raw(store, store_url, data["run_id"], data["status"], fixture(name))
    paused = await store.load_run("run_layout1_paused")
    assert paused is not None and paused.layout == 1 and len(paused.transcript) == 5
    (interaction,) = paused.interactions
    EXECUTED.clear()
    agent = make_agent(store, thread_model, [Tool(deploy, requires_approval=True), ask_user])
    done = await agent(
        parent_id=paused.run_id, resume={interaction.interaction_id: True}, run_id="run-resumed"
    ).collect()
    assert done.output == "done: deployed api 2.4" and EXECUTED == ["api 2.4"]
    child = await store.load_run("run-resumed")
    assert child is not None
    # The inline transcript is copied once, into a log named by the child.
    assert (child.layout, child.transcript_id, child.base) == (2, "run-resumed", 0)
    assert child.transcript[:5] == paused.transcript and child.root_id == "run_layout1_first"
    later = await agent(prompt="thanks", parent_id="run-resumed", run_id="run-later").collect()
    assert later.output == "Noted: thanks"
    grandchild = await store.load_run("run-later")
    assert grandchild is not None
    assert (grandchild.layout, grandchild.transcript_id) == (2, "run-resumed")
    assert grandchild.base == len(child.transcript)
    assert grandchild.transcript[: grandchild.base] == child.transcript
    assert grandchild.transcript[-2:] == [
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "Noted: thanks"},
    ]
    # The layout-1 records are untouched.
    for name in LAYOUT1:
        run = await store.load_run(json.loads(fixture(name))["run_id"])
        assert run is not None and run.layout == 1


async def test_a_thread_with_approvals_stores_each_message_once(
    store: Store, store_url: str
) -> None:
    """Journal saves (started, result), pauses, resumes and plain turns, all in one thread."""
    agent = make_agent(store, thread_model, [Tool(deploy, requires_approval=True)])
    last: str | None = None
    for turn in range(4):
        (approval,), paused, _ = await events_of(agent(prompt="deploy api", parent_id=last))
        done = await agent(
            parent_id=paused.run_id, resume={approval.interaction_id: True}
        ).collect()
        reply = await agent(prompt=f"thanks {turn}", parent_id=done.run_id).collect()
        last = reply.run_id
    assert last is not None
    final = await store.load_run(last)
    assert final is not None and final.layout == 2
    transcript_bytes = len(pydantic_core.to_json(final.transcript))
    # 12 runs, each with its own record; the messages once: far below a copy per run.
    assert await stored_bytes(store, store_url) < 2 * transcript_bytes + 12 * 700


async def test_a_200_message_thread_stores_at_most_twice_its_transcript(
    store: Store, store_url: str
) -> None:
    """Storage grows linearly with a thread: before layout 2 every run held the whole
    transcript again (about 55x at 200 messages)."""

    def reply(messages: list[dict[str, Any]]) -> str:
        return "Noted. The orders database looks healthy: replication lag 0.2 s, disk 41 % used."

    agent = make_agent(store, reply, [])
    empty = await stored_bytes(store, store_url)
    last: str | None = None
    for n in range(100):
        prompt = (
            f"message {n}: please look at the orders database and tell me whether anything is off"
        )
        last = (await agent(prompt=prompt, parent_id=last).collect()).run_id
    assert last is not None
    final = await store.load_run(last)
    assert final is not None and len(final.transcript) == 200
    transcript_bytes = len(pydantic_core.to_json(final.transcript))
    assert await stored_bytes(store, store_url) - empty <= 2 * transcript_bytes


async def test_racing_resumes_append_the_winners_messages_once(
    store: Store, store_url: str
) -> None:
    agent = make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "Which env?"}}), [ask_user]
    )
    (question,), paused, _ = await events_of(agent(prompt="go"))
    results = await asyncio.gather(
        *(
            agent(parent_id=paused.run_id, resume={question.interaction_id: f"env-{n}"}).collect()
            for n in range(6)
        ),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, RunAlreadyResumed) for r in results if r not in winners)
    child = await store.load_run(winners[0].run_id)
    parent = await store.load_run(paused.run_id)
    assert child is not None and parent is not None
    assert child.transcript[: len(parent.transcript)] == parent.transcript
    # The log holds the winner's transcript, each message once; the losers wrote nothing.
    expected = 2 * len(pydantic_core.to_json(child.transcript))
    assert await stored_bytes(store, store_url) < expected + 4000


async def logged_messages(store: Store, url: str) -> int:
    """How many messages the store's transcript logs hold, every copy counted."""
    if isinstance(store, SQLiteStore):
        with raw_sqlite(url) as conn:
            chunks = [row[0] for row in conn.execute("SELECT messages FROM transcripts")]
        conn.close()
        return sum(len(chunk.split("\n")) for chunk in chunks)
    assert isinstance(store, RedisStore)
    client = aioredis.Redis.from_url(url.split("?", 1)[0])
    try:
        fields = await client.hgetall(redis_keys(store).transcripts)
    finally:
        await client.aclose()
    return sum(int(v) for k, v in fields.items() if k.startswith(b"#"))


async def test_a_retried_run_appends_nothing_twice(store: Store, store_url: str) -> None:
    """A run whose process died while a tool ran is retried with the same id (its work item):
    it continues from its journal, saving what the first attempt saved again; each message
    stays in the log once."""
    ran: list[str] = []

    def charge(amount: int) -> str:
        ran.append("charge")
        if len(ran) == 2:
            raise Crash
        return f"charged {amount}"

    agent = make_agent(store, script({"name": "charge", "arguments": {"amount": 5}}), [charge])
    first = await agent(prompt="hello", run_id="t-1").collect()
    with pytest.raises(Crash):
        await agent(prompt="charge", parent_id=first.run_id, run_id="t-2").collect()
    journal = await store.load_run("t-2")
    assert journal is not None and journal.status == "running" and journal.layout == 2
    done = await agent(prompt="charge", parent_id=first.run_id, run_id="t-2").collect()
    # The call that died is reported interrupted, not run again.
    assert done.status.code == "success" and ran == ["charge", "charge"]
    final = await store.load_run("t-2")
    assert final is not None and final.transcript[: len(journal.transcript)] == journal.transcript
    assert await logged_messages(store, store_url) == len(final.transcript)
    # Saving it once more (a retry replays it rather than saving it) changes nothing either.
    before = await stored_bytes(store, store_url)
    await store.save_run(final)
    assert await stored_bytes(store, store_url) == before
