"""Fixtures every area shares: the real Redis server and a store of each kind; and how to
compare the pending interaction a record or an event carries."""

from __future__ import annotations

import gc
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from state import PendingInteraction

REDIS_URL = os.environ.get("HANDBACK_TEST_REDIS", "redis://127.0.0.1:6379/0")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def interaction_of(value: object) -> PendingInteraction:
    """The pending interaction `value` carries (a record, an event), to compare with the one
    `suspend()` made: dataclasses of two classes never compare equal."""
    return PendingInteraction(
        **{f.name: getattr(value, f.name) for f in fields(PendingInteraction)}
    )


def _redis_up() -> bool:
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


@pytest.fixture
def collect_garbage() -> Iterator[None]:
    """Collects garbage once the test is done, so that what it left unclosed (a socket, a
    transport) warns in that test and not in whichever runs next. Modules whose tests must
    close everything use it with `error::pytest.PytestUnraisableExceptionWarning`: see
    `UNCLOSED_FAILS`."""
    yield
    gc.collect()


UNCLOSED_FAILS = [
    pytest.mark.usefixtures("collect_garbage"),
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]
"""`pytestmark` for a module whose tests fail when they leave a socket or transport unclosed
(its ResourceWarning comes from the garbage collector, so pytest reports it as unraisable)."""


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis; in CI a missing server fails the test instead of skipping it."""
    if not _redis_up():
        if IN_CI:
            pytest.fail(f"Redis is not reachable at {REDIS_URL!r} and CI is set")
        pytest.skip(f"Redis is not reachable at {REDIS_URL!r}")
    return REDIS_URL


@pytest.fixture
def redis_store_url(redis_url: str) -> Iterator[str]:
    """A Redis store URL with a prefix of its own, so concurrent tests never share keys;
    whatever a test wrote under it is deleted afterwards, whoever opened the store."""
    sep = "&" if "?" in redis_url else "?"
    url = f"{redis_url}{sep}prefix=hbtest-{uuid.uuid4().hex[:12]}:"
    yield url
    _drop_prefix(url)


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'handback.db'}"


@pytest.fixture(params=["sqlite", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Each test that takes this runs once per store kind."""
    name = "sqlite_store_url" if request.param == "sqlite" else "redis_store_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[object]:
    from state import open_store

    async with open_store(store_url) as opened:
        yield opened


def _drop_prefix(url: str) -> None:
    import redis

    prefix = url.split("prefix=", 1)[1]
    client = redis.Redis.from_url(url.split("?", 1)[0])
    try:
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
