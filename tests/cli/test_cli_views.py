"""`handback audit` and `handback pending`: what an operator reads from the store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from state import AuditEntry, InteractionRecord, open_store

ROOT = Path(__file__).resolve().parents[2]


def handback(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot._cli", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _fill(url: str) -> None:
    now = time.time()
    async with open_store(url) as store:
        await store.audit(
            AuditEntry(
                at=now - 10,
                action="answered",
                user="U0BOB",
                run_id="run_1",
                interaction_id="int_1",
                detail="approved",
            )
        )
        await store.audit(
            AuditEntry(
                at=now,
                action="refused",
                user="U0DAVE",
                run_id="run_1",
                interaction_id="int_1",
                detail="not an approver\nof deploy",
            )
        )
        await store.add_interactions(
            [
                InteractionRecord(
                    interaction_id=f"int_{n}",
                    run_id="run_2",
                    kind=kind,
                    payload={},
                    channel="C0OPS",
                    thread_ts="1.2",
                    requester="U0ALICE",
                    created_at=now,
                    expires_at=now + n * 60,
                )
                for n, kind in [(3, "confirm"), (2, "approval")]
            ]
        )
        await store.answer_interaction("int_3", answer=True, answered_by="U0BOB", now=now)


async def test_audit_and_pending_read_the_store(store_url: str) -> None:
    await _fill(store_url)
    audit = handback("audit", "--store", store_url)
    assert audit.returncode == 0, audit.stderr
    lines = audit.stdout.splitlines()
    assert lines[0].split() == ["when", "action", "user", "run", "interaction", "detail"]
    assert "refused" in lines[1] and "not an approver of deploy" in lines[1]
    assert "answered" in lines[2] and "U0BOB" in lines[2]

    as_json = handback("audit", "--json", "--limit", "1", env={"HANDBACK_STORE": store_url})
    (entry,) = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert entry["action"] == "refused" and entry["user"] == "U0DAVE"

    pending = handback("pending", "--store", store_url)
    assert pending.returncode == 0, pending.stderr
    rows = pending.stdout.splitlines()
    assert len(rows) == 2  # the header and the one interaction still waiting
    assert "approval" in rows[1] and "int_2" in rows[1] and "C0OPS" in rows[1]


async def test_empty_store_and_bad_input(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    async with open_store(url):
        pass  # an empty store, as a bot that has not been used yet leaves it
    assert handback("audit", "--store", url).stdout == "The audit log is empty.\n"
    assert (
        handback("pending", "--store", url).stdout == "No interaction is waiting for an answer.\n"
    )
    bad = handback("audit", "--store", "mongodb://nope")
    assert bad.returncode == 2 and bad.stderr.startswith("handback: ")
    assert "Traceback" not in bad.stderr and len(bad.stderr.splitlines()) == 1
    assert handback("pending", "--store", url, "--limit", "0").returncode == 2


@pytest.mark.parametrize("command", ["audit", "pending"])
def test_unreachable_redis_is_one_line(command: str) -> None:
    done = handback(command, "--store", "redis://127.0.0.1:1/0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1


async def test_far_future_expiry_still_prints(store_url: str) -> None:
    async with open_store(store_url) as store:
        await store.add_interactions(
            [
                InteractionRecord(
                    interaction_id="int_far",
                    run_id="run_far",
                    kind="ask_user",
                    payload={},
                    channel="C0OPS",
                    created_at=time.time(),
                    expires_at=1e20,
                )
            ]
        )
    done = handback("pending", "--store", store_url)
    assert done.returncode == 0, done.stderr
    assert "an unknown date" in done.stdout and "int_far" in done.stdout


@pytest.mark.parametrize("command", ["audit", "pending"])
def test_a_store_that_does_not_exist_is_not_created(tmp_path: Path, command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot._cli", command],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "HANDBACK_STORE"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("handback: no store at sqlite:///handback.db")
    assert str(tmp_path / "handback.db") in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "handback.db").exists()


@pytest.mark.parametrize("command", ["audit", "pending"])
def test_a_closed_pipe_ends_quietly(tmp_path: Path, command: str) -> None:
    """`handback pending --json | head`: the reader went away; no traceback, SIGPIPE's status."""
    url = f"sqlite:///{tmp_path / 'handback.db'}"
    asyncio.run(_fill(url))
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write fails
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot._cli", command, "--json", "--store", url],
            cwd=ROOT,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141
