"""Record factories, raw access to what a store wrote, and the local Redis Cluster that the
state tests run against besides SQLite and a single Redis."""

from __future__ import annotations

import sqlite3
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from state import Grant, InteractionRecord, RedisStore, RunRecord, SQLiteStore, Store

# The id the Slack app gives the grant of an approval (the same on each retry of the click) is
# its internal, kept out of `state.__all__`: grants built here carry the id the app would give.
from state._grant import grant_id_for

# The store's raw side, for the tests that write or read behind its back (a corrupt record, an
# old layout): its key names and the file or server behind a URL, from here only.
from state._keys import RedisKeys

# The turn a worker claims with an answer, and the thread lease it names, are the Slack app's
# coordination records (kept out of `state.__all__`): the store tests build them here only.
from state._records import ThreadLease, TurnClaim
from state._url import redis_options, sqlite_path

from ..conftest import IN_CI
from .cluster import ClusterStartError, LocalCluster


def make_run(run_id: str = "run-1", **fields: Any) -> RunRecord:
    values: dict[str, Any] = {
        "parent_id": None,
        "agent_name": "ops",
        "status": "paused",
        "reason": "input_required",
    }
    values.update(fields)
    return RunRecord(run_id=run_id, **values)


def make_interaction(
    interaction_id: str = "ix-1", run_id: str = "run-1", **fields: Any
) -> InteractionRecord:
    now = time.time()
    values: dict[str, Any] = {
        "kind": "ask_user",
        "payload": {"question": "Which database?", "options": ["postgres", "sqlite"]},
        "channel": "C1",
        "thread_ts": "1700000000.000100",
        "created_at": now,
        "expires_at": now + 3600,
    }
    values.update(fields)
    return InteractionRecord(interaction_id=interaction_id, run_id=run_id, **values)


def make_turn(
    run_id: str = "run-1",
    child_id: str = "run-child",
    *,
    owner: str = "worker-a",
    channel: str = "C1",
    thread_ts: str = "1700000000.000100",
    lease_ttl: float = 30,
) -> TurnClaim:
    """The turn `owner` claims with the answer that resumes `run_id` (as `child_id`), under the
    lease of its thread for `lease_ttl` seconds."""
    lease = ThreadLease(channel=channel, thread_ts=thread_ts, owner=owner)
    return TurnClaim(run_id=run_id, child_id=child_id, lease=lease, lease_ttl=lease_ttl)


def grant_id(interaction_id: str) -> str:
    """The id of the grant given with the approval of `interaction_id`."""
    return grant_id_for(interaction_id)


def make_grant(interaction_id: str = "ix-1", **fields: Any) -> Grant:
    """A standing grant for `deploy` in one thread, given by Bob on `interaction_id` for Alice's
    requests, an hour long from now; `fields` replace any of that."""
    now = time.time()
    values: dict[str, Any] = {
        "grant_id": grant_id(interaction_id),
        "tool": "deploy",
        "scope": "thread",
        "channel": "C0GENERAL",
        "thread_ts": "1700000000.000100",
        "granted_by": "U0BOB",
        "created_at": now,
        "expires_at": now + 3600,
        "interaction_id": interaction_id,
        "path": "granter.deploy",
        "requesters": ("U0ALICE",),
    }
    values.update(fields)
    return Grant(**values)


async def overwrite_raw(store: Store, url: str, table: str, ident: str, raw: str) -> str:
    """Replace the stored JSON of one run (`runs`), interaction (`interactions`) or grant
    (`grants`) with `raw`.

    Returns the key or row name the store should report in its error.
    """
    if isinstance(store, RedisStore):
        keys = redis_keys(store)
        key = {"runs": keys.run, "grants": keys.grant}.get(table, keys.interaction)(ident)
        client = raw_client(url)
        try:
            await client.hset(key, "rec", raw)
        finally:
            await client.aclose()
        return key
    assert isinstance(store, SQLiteStore)
    column = {"runs": "run_id", "grants": "grant_id"}.get(table, "interaction_id")
    with sqlite3.connect(sqlite_path(url)) as conn:
        conn.execute(f"UPDATE {table} SET rec = ? WHERE {column} = ?", (raw, ident))
    conn.close()
    return f"{table}/{ident}"


async def read_raw(store: Store, url: str, ident: str, table: str = "interactions") -> str:
    """The stored JSON of one interaction (or run: `runs`; or grant: `grants`), as the store
    wrote it."""
    if isinstance(store, RedisStore):
        keys = redis_keys(store)
        key = {"runs": keys.run, "grants": keys.grant}.get(table, keys.interaction)(ident)
        client = raw_client(url)
        try:
            raw = await client.hget(key, "rec")
        finally:
            await client.aclose()
        assert isinstance(raw, bytes)
        return raw.decode()
    assert isinstance(store, SQLiteStore)
    column = {"runs": "run_id", "grants": "grant_id"}.get(table, "interaction_id")
    with sqlite3.connect(sqlite_path(url)) as conn:
        (raw,) = conn.execute(f"SELECT rec FROM {table} WHERE {column} = ?", (ident,)).fetchone()
    conn.close()
    return str(raw)


def redis_keys(store: RedisStore) -> RedisKeys:
    """The key names `store` uses (tagged on a cluster)."""
    return RedisKeys(store.prefix, cluster=store.cluster)


def raw_sqlite(url: str) -> sqlite3.Connection:
    """A plain connection to the database file behind an sqlite:// store URL."""
    return sqlite3.connect(sqlite_path(url))


def raw_client(url: str) -> aioredis.Redis | aioredis.RedisCluster:
    """A client of the server or cluster behind a store URL, without the store's parameters."""
    options = redis_options(url)
    if options.cluster:
        return aioredis.RedisCluster.from_url(options.client_url)
    return aioredis.Redis.from_url(options.client_url)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local 3-master Redis Cluster, once per session; in CI one that cannot start fails the
    tests instead of skipping them."""
    cluster = LocalCluster(directory=tmp_path_factory.mktemp("redis-cluster"))
    try:
        try:
            cluster.start()
        except (ClusterStartError, OSError, subprocess.SubprocessError) as exc:
            if IN_CI:
                pytest.fail(f"cannot start a local Redis Cluster and CI is set: {exc}")
            pytest.skip(f"cannot start a local Redis Cluster: {exc}")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_store_url(redis_cluster: LocalCluster) -> Iterator[str]:
    """A `redis+cluster://` store URL with a prefix of its own; whatever a test wrote under it
    is deleted afterwards, on every master."""
    prefix = f"hbtest-{uuid.uuid4().hex[:12]}:"
    yield f"{redis_cluster.url}?prefix={prefix}"
    redis_cluster.drop(f"*{prefix}*")


@pytest.fixture(params=["sqlite", "redis", "cluster"])
def store_url(request: pytest.FixtureRequest) -> str:
    """The state tests run once per store kind, a Redis Cluster included."""
    return str(request.getfixturevalue(f"{request.param}_store_url"))
