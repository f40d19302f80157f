"""The Redis store's connection: URLs with a password and a db, TLS to a plain server, a
server that goes away or forgets its scripts, and cancelled calls."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis

from state import (
    Approval,
    AuditEntry,
    Grant,
    RedisStore,
    StopGuard,
    StoreError,
    open_store,
)

from ..conftest import answer_only
from .conftest import grant_id, make_interaction, make_run, make_turn


@pytest.fixture(params=["redis", "cluster"])
async def any_redis_store(request: pytest.FixtureRequest) -> AsyncIterator[RedisStore]:
    """A store on the single Redis, then on the Redis Cluster."""
    async with RedisStore.from_url(
        str(request.getfixturevalue(f"{request.param}_store_url"))
    ) as store:
        yield store


def _with_db(url: str, db: int, *, password: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if password is not None:
        netloc = f":{password}@{netloc}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{db}"))


async def test_a_url_with_a_password_and_a_db_number_uses_that_db(redis_url: str) -> None:
    prefix = f"hbtest-{uuid.uuid4().hex[:12]}:"
    # A server without `requirepass` accepts any password from the default user.
    url = _with_db(redis_url, 9, password="s3cr3t-pw") + f"?prefix={prefix}"
    db9 = redis.Redis.from_url(_with_db(redis_url, 9))
    try:
        async with open_store(url) as store:
            assert "s3cr3t-pw" not in repr(store)
            await store.save_run(make_run())
            assert db9.exists(f"{prefix}run:run-1") == 1
            assert await store.load_run("run-1") == make_run()
    finally:
        keys = list(db9.scan_iter(match=f"{prefix}*"))
        if keys:
            db9.delete(*keys)
        db9.close()


async def test_rediss_to_a_plain_server_fails_at_open_as_a_store_error(redis_url: str) -> None:
    """Query options other than `prefix` reach redis-py, so a connect timeout can be set."""
    parts = urlsplit(redis_url)
    url = urlunsplit(
        parts._replace(scheme="rediss", query="socket_connect_timeout=0.5&prefix=hbtest-tls:")
    )
    started = time.monotonic()
    with pytest.raises(StoreError, match="cannot reach Redis"):
        async with open_store(url):
            pass
    assert time.monotonic() - started < 4


class Proxy:
    """A TCP relay to the real Redis that can be cut, as when the server goes away."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        self.writers += [writer, upstream_writer]
        await asyncio.gather(
            self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer)
        )

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def cut(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()


RedisCall = Callable[[RedisStore], Awaitable[object]]


REDIS_CALLS: dict[str, RedisCall] = {
    "save_run": lambda s: s.save_run(make_run()),
    "load_run": lambda s: s.load_run("run-1"),
    "claim_run": lambda s: s.claim_run("run-1", child_id="child"),
    "add_interactions": lambda s: s.add_interactions([make_interaction()]),
    "get_interaction": lambda s: s.get_interaction("ix-1"),
    "run_interactions": lambda s: s.run_interactions("run-1"),
    "set_message": lambda s: s.set_message("ix-1", channel="C1", message_ts="1.2"),
    "answer_and_claim": lambda s: s.answer_and_claim(
        "ix-1",
        answer=1,
        answered_by="U1",
        now=time.time(),
        audit=AuditEntry(at=1.0, action="answered"),
    ),
    "close_interaction": lambda s: s.close_interaction("ix-1", status="expired", now=time.time()),
    "due_interactions": lambda s: s.due_interactions(time.time()),
    "due_nudges": lambda s: s.due_nudges(time.time()),
    "mark_nudged": lambda s: s.mark_nudged("ix-1", "reminder", now=time.time()),
    "withdraw_answer": lambda s: s.withdraw_answer(
        "ix-1", answered_by="U1", run_id="run-1", audit=AuditEntry(at=1.0, action="withdrawn")
    ),
    "withdraw_vote": lambda s: s.withdraw_vote(
        "ix-1", user="U1", audit=AuditEntry(at=1.0, action="withdrawn")
    ),
    "settled_runs": lambda s: s.settled_runs(),
    "set_thread_run": lambda s: s.set_thread_run("C1", "1.1", "run-1"),
    "get_thread_run": lambda s: s.get_thread_run("C1", "1.1"),
    "audit": lambda s: s.audit(AuditEntry(at=1.0, action="answered")),
    "recent_audit": lambda s: s.recent_audit(),
    "enqueue": lambda s: s.enqueue("event", {"n": 1}, dedupe="Ev1"),
    "take": lambda s: s.take("worker-a"),
    "blocking_take": lambda s: s.take("worker-a", block=1.0),
    "extend": lambda s: s.extend("worker-a", ["1-0"], lease=5),
    "done": lambda s: s.done("1-0"),
    "inbox_size": lambda s: s.inbox_size(),
}


@pytest.mark.parametrize("name", sorted(REDIS_CALLS))
async def test_a_redis_that_goes_away_mid_run_is_a_store_error(
    redis_url: str, redis_store_url: str, name: str
) -> None:
    parts = urlsplit(redis_url)
    proxy = Proxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    port = await proxy.start()
    prefix = redis_store_url.split("prefix=", 1)[1]
    url = urlunsplit(parts._replace(netloc=f":pw-hidden@127.0.0.1:{port}", query=""))
    async with RedisStore.from_url(f"{url}?prefix={prefix}") as store:
        await store.save_run(make_run())
        await proxy.cut()
        with pytest.raises(StoreError, match="Redis at `redis://:\\*\\*\\*@") as caught:
            await REDIS_CALLS[name](store)
        assert isinstance(caught.value.__cause__, redis.RedisError)
        assert "pw-hidden" not in str(caught.value)


async def test_every_script_is_reloaded_when_the_server_forgot_it(
    any_redis_store: RedisStore,
) -> None:
    """A restarted server (or `SCRIPT FLUSH`) answers NOSCRIPT; redis-py loads the script again.
    An unknown digest gets exactly that answer without flushing the shared server."""
    scripts = [value for value in vars(any_redis_store).values() if hasattr(value, "sha")]
    assert len(scripts) == 34
    for script in scripts:
        script.sha = "0" * 40
    await any_redis_store.save_run(make_run())
    appended = make_run(
        "run-3", layout=2, transcript_id="run-3", transcript=[{"role": "user", "content": "hi"}]
    )
    await any_redis_store.save_run(appended)
    assert await any_redis_store.load_run("run-3") == appended
    await any_redis_store.save_run(make_run("run-2"))
    await any_redis_store.add_interactions(
        [make_interaction("ix-1"), make_interaction("ix-2", expires_at=1.0)]
    )
    await any_redis_store.add_interactions([make_interaction("ix-3", run_id="run-2")])
    await any_redis_store.set_message("ix-1", channel="C9", message_ts="9.9")
    assert len(await any_redis_store.run_interactions("run-1")) == 2
    assert [r.interaction_id for r in await any_redis_store.due_interactions(time.time())] == [
        "ix-2"
    ]
    assert (await answer_only(any_redis_store, "ix-1", answer=1, answered_by="U", now=2.0)).won
    assert (await any_redis_store.close_interaction("ix-2", status="expired", now=2.0)).won
    assert await any_redis_store.settled_runs() == ["run-1"]
    assert (await any_redis_store.claim_run("run-1", child_id="child")).won
    assert (await any_redis_store.claim_run("run-2", child_id="child")).won
    await any_redis_store.save_run(make_run("run-4"))
    read = await any_redis_store.claim_run("run-4", child_id="child", read=True)
    assert read.won
    assert await any_redis_store.release_run("run-4", child_id="child")
    assert (await any_redis_store.close_interaction("ix-3", status="superseded", now=2.0)).won
    assert await any_redis_store.settled_runs() == []  # run-2, claimed, dropped from the index
    await any_redis_store.audit(AuditEntry(at=1.0, action="answered"))
    await any_redis_store.save_run(make_run("run-3"))
    await any_redis_store.add_interactions([make_interaction("ix-4", run_id="run-3")])
    answered = await any_redis_store.answer_and_claim(
        "ix-4",
        answer=1,
        answered_by="U",
        now=2.0,
        audit=AuditEntry(at=2.0, action="answered"),
        turn=make_turn("run-3", "child", owner="a", channel="C2", thread_ts="2.2", lease_ttl=60),
    )
    assert answered.won and answered.run is not None
    assert await any_redis_store.acquire_thread("C1", "1.1", owner="a", ttl=60)
    assert (await any_redis_store.take_thread("C1", "1.1", owner="a", ttl=60)).held
    await any_redis_store.release_thread("C1", "1.1", owner="a")
    item_id = await any_redis_store.enqueue("event", {"n": 1}, dedupe="Ev1")
    assert [item.item_id for item in await any_redis_store.take("worker-a")] == [item_id]
    assert await any_redis_store.extend("worker-a", [str(item_id)], lease=5) == [item_id]
    await any_redis_store.done(str(item_id))
    await any_redis_store.save_run(make_run("run-5"))
    rule = Approval(remind_after=1).to_json()
    nudged = make_interaction(
        "ix-5", run_id="run-5", kind="approval", payload={"tool": "t", "rule": rule}, created_at=1.0
    )
    await any_redis_store.add_interactions([nudged])
    assert [n.kind for n in await any_redis_store.due_nudges(time.time())] == ["reminder"]
    assert (await any_redis_store.mark_nudged("ix-5", "reminder", now=time.time())).won
    await answer_only(any_redis_store, "ix-5", answer=True, answered_by="U", now=2.0)
    withdrawn = await any_redis_store.withdraw_answer(
        "ix-5", answered_by="U", run_id="run-5", audit=AuditEntry(at=3.0, action="withdrawn")
    )
    assert withdrawn.won
    await any_redis_store.mark_home_opened("U1", ttl=60)
    now = time.time()
    await any_redis_store.add_interactions([make_interaction("ix-6", run_id="run-5")])
    grant = Grant(
        grant_id=grant_id("ix-5"),
        tool="t",
        scope="thread",
        channel="C1",
        thread_ts="1.1",
        granted_by="U",
        created_at=now,
        expires_at=now + 60,
        interaction_id="ix-5",
        run_id="run-5",
        path="agent.t",
        requesters=("U0ALICE",),
    )
    assert await any_redis_store.add_grant(grant, audit=AuditEntry(at=now, action="granted"))
    assert await any_redis_store.covering_grants("t", channel="C1", thread_ts="1.1", now=now)
    assert await any_redis_store.active_grants(now=now)
    under = await any_redis_store.answer_under_grant(
        "ix-6",
        grant_id=grant.grant_id,
        answer=True,
        answered_by="U",
        now=now,
        audit=AuditEntry(at=now, action="answered"),
    )
    assert under.won
    revoked = await any_redis_store.revoke_grant(
        grant.grant_id, by="U", now=now, audit=AuditEntry(at=now, action="revoked")
    )
    assert revoked.won
    pair = {"tool": "t", "rule": Approval(count=2).to_json()}
    await any_redis_store.add_interactions(
        [make_interaction("ix-7", run_id="run-5", kind="approval", payload=pair)]
    )
    voted = await any_redis_store.answer_and_claim(
        "ix-7",
        answer={"approved": True},
        answered_by="U",
        now=now,
        audit=[AuditEntry(at=now, action="answered")] * 2,
        needed=2,
    )
    assert voted.partial
    unvoted = await any_redis_store.withdraw_vote(
        "ix-7", user="U", audit=AuditEntry(at=now, action="withdrawn")
    )
    assert unvoted.won and unvoted.record is not None and unvoted.record.votes == []
    # The journal's guarded saves (the started mark of a turn that may have been stopped).
    guard = StopGuard(run_id="run-6", channel="C9", thread_ts="6.0")
    assert await any_redis_store.save_run(make_run("run-6"), stop=guard)
    guarded = make_run(
        "run-7", layout=2, transcript_id="run-7", transcript=[{"role": "user", "content": "hi"}]
    )
    assert await any_redis_store.save_run(guarded, stop=replace(guard, run_id="run-7"))
    assert all(script.sha != "0" * 40 for script in scripts)


async def test_a_cancelled_redis_call_does_not_shift_later_replies(
    any_redis_store: RedisStore,
) -> None:
    """A reply left unread on a pooled connection would answer the next caller's command."""
    for n in range(3):
        await any_redis_store.save_run(make_run(f"run-{n}"))
    for attempt in range(40):
        task = asyncio.create_task(any_redis_store.load_run("run-0"))
        for _ in range(attempt % 4):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        loaded = await any_redis_store.load_run(f"run-{1 + attempt % 2}")
        assert loaded is not None and loaded.run_id == f"run-{1 + attempt % 2}"
