"""Opening stores from URLs, their lifecycle, and the package's public names."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import state
from state import (
    RedisStore,
    SQLiteStore,
    StoreClosedError,
    StoreError,
    StoreURLError,
    open_store,
)

from .conftest import make_run


def _isort_style(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: constants, then classes, then everything else."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def test_all_is_sorted_and_exported() -> None:
    assert state.__all__ == sorted(state.__all__, key=_isort_style)
    for name in state.__all__:
        assert getattr(state, name) is not None


@pytest.mark.parametrize(
    "url",
    [
        "postgres://user:hunter2@db/handback",
        "redis-cluster://:hunter2@host",
        "handback.db",
        "sqlite:/relative.db",
        "sqlite://relative.db",
        "sqlite:///",
        "sqlite:///x.db?mode=ro",
        "sqlite:///x.db?synchronous=off",
        "sqlite:///x.db?synchronous=full&synchronous=normal",
        "sqlite:///x.db?synchronus=full",
    ],
)
async def test_a_bad_url_is_a_value_error_naming_it_without_its_password(url: str) -> None:
    with pytest.raises(StoreURLError) as caught:
        async with open_store(url):
            pass
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    assert "hunter2" not in message
    assert url.replace("hunter2", "***") in message


async def test_a_redis_url_with_two_prefixes_is_refused() -> None:
    with pytest.raises(StoreURLError, match="prefix"):
        RedisStore.from_url("redis://127.0.0.1:6379/0?prefix=a:&prefix=b:")


async def test_an_unreachable_redis_fails_at_open_without_its_password() -> None:
    url = "redis://:hunter2@127.0.0.1:1/0"
    with pytest.raises(StoreError, match="cannot reach Redis") as caught:
        async with open_store(url):
            pass
    assert "hunter2" not in str(caught.value)


async def test_redis_url_opens_a_redis_store_under_its_prefix(redis_store_url: str) -> None:
    async with open_store(redis_store_url) as store:
        assert isinstance(store, RedisStore)
        assert store.prefix == redis_store_url.split("prefix=", 1)[1]
        await store.save_run(make_run())
        assert await store.load_run("run-1") == make_run()
    async with open_store(redis_store_url + "x") as elsewhere:
        assert await elsewhere.load_run("run-1") is None


async def test_relative_sqlite_urls_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_store("sqlite:///sub.db") as store:
        assert isinstance(store, SQLiteStore)
        await store.save_run(make_run())
    assert (tmp_path / "sub.db").is_file()


async def test_absolute_sqlite_urls_keep_their_leading_slash(tmp_path: Path) -> None:
    path = tmp_path / "abs.db"
    assert path.is_absolute()
    async with open_store(f"sqlite:///{path}") as store:
        await store.save_run(make_run())
    async with open_store(f"sqlite:///{path}") as store:
        assert await store.load_run("run-1") == make_run()


async def test_memory_sqlite_works_and_forgets(tmp_path: Path) -> None:
    async with open_store("sqlite:///:memory:") as store:
        await store.save_run(make_run())
        assert await store.load_run("run-1") == make_run()
    async with open_store("sqlite:///:memory:") as store:
        assert await store.load_run("run-1") is None


async def test_no_url_reads_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HANDBACK_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    async with open_store() as store:
        await store.save_run(make_run())
    assert (tmp_path / "env.db").is_file()


async def test_no_url_and_no_environment_uses_handback_db_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HANDBACK_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    async with open_store() as store:
        assert isinstance(store, SQLiteStore)
    assert os.listdir(tmp_path) and (tmp_path / "handback.db").is_file()


async def test_stores_are_context_managers_themselves(tmp_path: Path, redis_store_url: str) -> None:
    async with SQLiteStore(tmp_path / "direct.db") as sqlite_store:
        await sqlite_store.save_run(make_run())
        assert await sqlite_store.load_run("run-1") == make_run()
    async with RedisStore.from_url(redis_store_url) as redis_store:
        await redis_store.save_run(make_run())
        assert await redis_store.load_run("run-1") == make_run()


async def test_use_after_close_fails_loudly(store_url: str) -> None:
    async with open_store(store_url) as store:
        pass
    await store.aclose()
    with pytest.raises(StoreClosedError, match="closed"):
        await store.load_run("run-1")
    with pytest.raises(StoreClosedError):
        await store.save_run(make_run())
    with pytest.raises(StoreClosedError):
        await store.enqueue("event", {"n": 1}, dedupe="Ev1")


@pytest.mark.parametrize(
    ("url", "prefix"),
    [
        ("redis://127.0.0.1:6379/0", "hb:"),
        ("rediss://:pw@cache.example:6380/2?prefix=app:", "app:"),
        ("unix:///run/redis.sock?db=3&prefix=sock:", "sock:"),
    ],
)
async def test_every_redis_scheme_builds_a_store_without_connecting(url: str, prefix: str) -> None:
    store = RedisStore.from_url(url)
    assert store.prefix == prefix
    assert "pw" not in repr(store)
    await store.aclose()


async def test_a_redis_url_with_a_bad_port_is_a_url_error() -> None:
    with pytest.raises(StoreURLError, match=re.escape("redis://127.0.0.1:port")):
        RedisStore.from_url("redis://127.0.0.1:port/0")


def test_each_store_class_refuses_the_other_ones_url(tmp_path: Path) -> None:
    with pytest.raises(StoreURLError, match="redis://"):
        RedisStore.from_url(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(StoreURLError, match="sqlite://"):
        SQLiteStore.from_url("redis://127.0.0.1:6379/0")


@pytest.mark.parametrize(
    ("query", "level"), [("", 1), ("?synchronous=normal", 1), ("?synchronous=FULL", 2)]
)
async def test_sqlite_durability_is_a_url_setting(tmp_path: Path, query: str, level: int) -> None:
    """WAL with `synchronous=NORMAL` by default; `?synchronous=full` fsyncs every commit."""
    import sqlite3

    async with open_store(f"sqlite:///{tmp_path / 'sync.db'}{query}") as store:
        await store.save_run(make_run())
        conn = store._conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == level
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(tmp_path / "sync.db") as check:
        assert check.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
