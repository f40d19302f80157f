"""Fixtures every area shares: the real Redis server and a store of each kind; and how to
compare the pending interaction a record or an event carries."""

from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from state import AuditEntry, InteractionStore, PendingInteraction

# A vote is the Slack app's coordination record, kept out of `state.__all__`: records that
# carry votes (a two-person approval half way) are built with `votes` below, in this one place.
from state._records import Vote

if TYPE_CHECKING:
    # The claim's class is the store's own, kept out of `state.__all__`; only its type is named.
    from state._records import AnswerClaim

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# Hypothesis: no per-example deadline (a loaded two-core machine makes a 200 ms deadline a
# timing failure, not a finding) and, in CI, no example database in the fresh clone; each
# property keeps its own `max_examples`. `HYPOTHESIS_PROFILE=dev` or `ci` picks one by hand.
settings.register_profile("dev", deadline=None)
settings.register_profile("ci", deadline=None, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "dev"))


class OwnRedis:
    """A `redis-server` of the test session's own, on a free loopback port, keeping nothing on
    disk: the suite never writes into a Redis that holds someone's data. Started on first use;
    `HANDBACK_TEST_REDIS` points the suite at another server instead."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.root: str | None = None

    def start(self) -> str:
        executable = shutil.which("redis-server")
        if executable is None:
            raise RuntimeError(
                "redis-server is not installed (Debian: apt-get install redis-server)"
            )
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.root = tempfile.mkdtemp(prefix="handback-test-redis-")
        self.process = subprocess.Popen(
            [
                executable,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                self.root,
                "--maxclients",
                "10000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 15
        while not _redis_up(url):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.05)
        return url

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


_OWN_REDIS = OwnRedis()


def pytest_configure(config: pytest.Config) -> None:
    """Starts the session's own Redis before collection, unless `HANDBACK_TEST_REDIS` names one,
    and exports its URL in `HANDBACK_TEST_REDIS` so subprocesses and helpers find the same one."""
    if os.environ.get("HANDBACK_TEST_REDIS"):
        return
    try:
        os.environ["HANDBACK_TEST_REDIS"] = _OWN_REDIS.start()
    except RuntimeError as error:
        # The `redis_url` fixture reports it (a skip, or a failure in CI) in the tests needing it.
        os.environ["HANDBACK_TEST_REDIS_ERROR"] = str(error)


def pytest_unconfigure(config: pytest.Config) -> None:
    _OWN_REDIS.stop()


SLOW_MODULES = frozenset(
    {
        "cli/test_cli_grants.py",
        "cli/test_cli_views.py",
        "cli/test_doctor.py",
        "playground/test_playground_browser.py",
        "playground/test_playground_dev_command.py",
        "playground/test_playground_first_use.py",
        "playground/test_playground_hostile_text.py",
        "playground/test_playground_page_api.py",
        "playground/test_playground_people.py",
        "runtime/test_crash_process.py",
        "runtime/test_runtime_process.py",
        "slack/test_agent_stop_processes.py",
        "slack/test_durable_burst.py",
        "slack/test_durable_call_ids.py",
        "slack/test_durable_crashes.py",
        "slack/test_durable_outage.py",
        "slack/test_durable_workers.py",
        "slack/test_fuzz.py",
        "slack/test_slack_process.py",
        "slack/test_slack_two_processes.py",
        "slack/test_two_person_crashes.py",
        "state/test_inbox_processes.py",
        "state/test_redis_cluster.py",
        "state/test_state_processes.py",
    }
)
"""Test modules (under tests/) that start processes, a browser or a Redis Cluster, or fuzz:
`slow`, so `pytest -m quick` leaves them out. A slow test elsewhere says so with the marker."""

SLOW_TESTS = frozenset(
    {
        "test_handback_run_processes_fire_each_once_across_a_kill",
        "test_sweepers_in_separate_processes_fire_each_once",
        "test_the_audit_log_keeps_exactly_the_newest_cap_entries",
        "test_runtime_imports_nothing_from_slack",
        "test_blocks_does_not_import_bot",
        "test_version",
    }
)
"""Single tests (by function name) that start a process in an otherwise quick module."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`slow` for what starts processes, browsers or a cluster (`SLOW_MODULES`, `SLOW_TESTS`,
    a `cluster` store parameter); `quick` for every test that is none of slow, browser, fuzz
    or peers: `pytest -m quick` is the subset to run while working (about two minutes)."""
    root = Path(__file__).parent
    for item in items:
        module = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else ""
        function = getattr(item, "originalname", item.name)
        callspec = getattr(item, "callspec", None)
        clustered = callspec is not None and "cluster" in callspec.id.split("-")
        if module in SLOW_MODULES or function in SLOW_TESTS or clustered:
            item.add_marker(pytest.mark.slow)
        if not any(item.get_closest_marker(name) for name in ("slow", "browser", "fuzz", "peers")):
            item.add_marker(pytest.mark.quick)


def redis_url_for_tests() -> str:
    """The Redis the tests use (the session's own unless `HANDBACK_TEST_REDIS` is set)."""
    return os.environ.get("HANDBACK_TEST_REDIS", "redis://127.0.0.1:0/0")


def interaction_of(value: object) -> PendingInteraction:
    """The pending interaction `value` carries (a record, an event), to compare with the one
    `suspend()` made: dataclasses of two classes never compare equal."""
    return PendingInteraction(
        **{f.name: getattr(value, f.name) for f in fields(PendingInteraction)}
    )


def votes(*cast: tuple[str, float]) -> list[Vote]:
    """The votes of an approval that needs several: `(user, at)`, in the order they came."""
    return [Vote(user=user, at=at) for user, at in cast]


async def answer_only(
    store: InteractionStore, interaction_id: str, *, answer: Any, answered_by: str, now: float
) -> AnswerClaim:
    """Answer an interaction the way a click with no resume to claim does: `answer_and_claim`
    without a turn, with the one audit entry the Slack app writes for an answer."""
    entry = AuditEntry(
        at=1_700_000_000.0, action="answered", interaction_id=interaction_id, user=answered_by
    )
    return await store.answer_and_claim(
        interaction_id, answer=answer, answered_by=answered_by, now=now, audit=entry
    )


def _redis_up(url: str) -> bool:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
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
    url = redis_url_for_tests()
    problem = os.environ.get("HANDBACK_TEST_REDIS_ERROR")
    if problem is None and not _redis_up(url):
        problem = f"Redis is not reachable at {url!r}"
    if problem is not None:
        if IN_CI:
            pytest.fail(f"{problem} and CI is set")
        pytest.skip(problem)
    return url


TEST_SECRETS = (
    "hunter2",
    "s3cret",
    "s3cr3t",
    "xoxb-1234567890-leaked",
    "xoxb-123-456-abcDEF",
    "sk-abcdefghij",
)
"""The secrets tests type (in messages, commands, arguments, forms): none may reach an audit
log. Every store a test used is scanned for them before it is thrown away (`_audit_leaks`), so
"the audit of the whole suite's stores holds none" is checked by every run of any test."""


@pytest.fixture
def redis_store_url(redis_url: str) -> Iterator[str]:
    """A Redis store URL with a prefix of its own, so concurrent tests never share keys;
    whatever a test wrote under it is deleted afterwards, whoever opened the store, once its
    audit log was found to hold none of `TEST_SECRETS`."""
    sep = "&" if "?" in redis_url else "?"
    url = f"{redis_url}{sep}prefix=hbtest-{uuid.uuid4().hex[:12]}:"
    yield url
    leaks = _redis_audit_leaks(url)
    _drop_prefix(url)
    if leaks:
        pytest.fail(f"the audit log holds typed secrets: {leaks}")


@pytest.fixture
def sqlite_store_url(tmp_path: Path) -> Iterator[str]:
    """A SQLite store URL in the test's own directory; its audit log is checked for
    `TEST_SECRETS` afterwards."""
    path = tmp_path / "handback.db"
    yield f"sqlite:///{path}"
    leaks = _sqlite_audit_leaks(path)
    if leaks:
        pytest.fail(f"the audit log holds typed secrets: {leaks}")


def _audit_leaks(entries: list[bytes | str]) -> list[str]:
    """The raw audit entries (the bytes the store keeps) that hold a test secret."""
    found = []
    for raw in entries:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        if any(secret in text for secret in TEST_SECRETS):
            found.append(text[:300])
    return found


def _redis_audit_leaks(url: str) -> list[str]:
    import redis

    prefix = url.split("prefix=", 1)[1]
    client = redis.Redis.from_url(url.split("?", 1)[0])
    try:
        entries: list[bytes | str] = []
        # The audit list under the prefix, tagged or not (a cluster's `{prefix}audit`).
        for key in client.scan_iter(match=f"*{prefix}*audit"):
            if client.type(key) == b"list":
                entries += client.lrange(key, 0, -1)
        return _audit_leaks(entries)
    finally:
        client.close()


def _sqlite_audit_leaks(path: Path) -> list[str]:
    import sqlite3

    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit'").fetchall()
        if not tables:
            return []
        return _audit_leaks([row[0] for row in conn.execute("SELECT rec FROM audit")])
    except sqlite3.Error:
        return []  # a test that broke the file on purpose has no audit to read
    finally:
        conn.close()


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
