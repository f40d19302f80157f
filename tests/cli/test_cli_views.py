"""`handback audit` and `handback pending`: what an operator reads from the store."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import signal
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
        # Answered as a click answers: the audit entry is written with the answer.
        claim = await store.answer_and_claim(
            "int_3",
            answer=True,
            answered_by="U0BOB",
            now=now,
            audit=AuditEntry(
                at=now - 10,
                action="answered",
                user="U0BOB",
                run_id="run_2",
                interaction_id="int_3",
                detail="approved",
            ),
        )
        assert claim.won
        await store.audit(
            AuditEntry(
                at=now,
                action="refused",
                user="U0DAVE",
                run_id="run_2",
                interaction_id="int_2",
                detail="not an approver\nof deploy",
            )
        )


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


async def _fill_approvals(url: str) -> float:
    """Audit entries of two tools in two channels by two people, hours apart."""
    now = time.time()
    async with open_store(url) as store:
        await store.add_interactions(
            [
                InteractionRecord(
                    interaction_id=f"int_{tool}",
                    run_id=f"run_{tool}",
                    kind="approval",
                    payload={
                        "tool": tool,
                        "arguments": {"env": "prod", "api_token": "sk-live-SECRET", "note": note},
                    },
                    channel=channel,
                    thread_ts="1.2",
                    requester="U0ALICE",
                    created_at=now - 3600,
                    expires_at=now + 3600,
                )
                for tool, channel, note in [
                    ("deploy", "C0OPS", "\x1b[2J\x1b]0;owned\x07wiped"),
                    ("restart", "C0DEV", "=HYPERLINK(1)"),
                ]
            ]
        )
        for at, action, user, interaction, detail in [
            (now - 3 * 86400, "answered", "U0BOB", "int_deploy", "approved `deploy`"),
            (now - 2 * 3600, "refused", "U0DAVE", "int_deploy", "=cmd|' /C calc'!A0"),
            (now - 60, "answered", "U0BOB", "int_restart", "approved `restart`"),
            (now - 30, "revoked", "U0BOB", None, "revoked standing grant g_1"),
        ]:
            await store.audit(
                AuditEntry(
                    at=at,
                    action=action,  # type: ignore[arg-type]
                    user=user,
                    interaction_id=interaction,
                    run_id=None,
                    detail=detail,
                )
            )
    return now


def _audit_csv(url: str, *args: str) -> list[dict[str, str]]:
    done = handback("audit", "--store", url, "--csv", *args)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0] == ["at", "action", "interaction_id", "run_id", "user", "detail"]
    return [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


async def test_audit_filters_each_and_combined(store_url: str) -> None:
    await _fill_approvals(store_url)

    def details(*args: str) -> list[str]:
        return [row["detail"] for row in _audit_csv(store_url, *args)]

    assert len(details()) == 4
    assert details("--user", "U0DAVE") == ["'=cmd|' /C calc'!A0"]
    assert details("--tool", "restart") == ["approved `restart`"]
    assert details("--channel", "C0OPS") == ["'=cmd|' /C calc'!A0", "approved `deploy`"]
    assert details("--outcome", "revoked") == ["revoked standing grant g_1"]
    assert details("--outcome", "revoked,refused") == [
        "revoked standing grant g_1",
        "'=cmd|' /C calc'!A0",
    ]
    assert details("--since", "1d") == [
        "revoked standing grant g_1",
        "approved `restart`",
        "'=cmd|' /C calc'!A0",
    ]
    assert details("--until", "1h") == ["'=cmd|' /C calc'!A0", "approved `deploy`"]
    assert details("--user", "U0BOB", "--tool", "deploy") == ["approved `deploy`"]
    assert details("--user", "U0BOB", "--since", "1d", "--limit", "1") == [
        "revoked standing grant g_1"
    ]
    # --limit counts matches, not the entries read: the oldest entry is found past newer ones.
    assert details("--outcome", "answered", "--tool", "deploy", "--limit", "1") == [
        "approved `deploy`"
    ]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() - 5 * 3600))
    assert len(details("--since", since)) == 3
    assert details("--tool", "nothing") == []
    table = handback("audit", "--store", store_url, "--tool", "nothing")
    assert table.stdout == "No audit entry matches.\n"
    as_json = handback("audit", "--store", store_url, "--json", "--user", "U0DAVE")
    assert [json.loads(line)["action"] for line in as_json.stdout.splitlines()] == ["refused"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--since", "yesterday"], "`--since`"),
        (["--until", "2h30"], "`--until`"),
        (["--outcome", "approved"], "'approved' is not an audit action"),
        (["--json", "--csv"], "cannot be combined"),
    ],
)
def test_a_bad_audit_filter_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], says: str
) -> None:
    url = f"sqlite:///{tmp_path / 'handback.db'}"
    asyncio.run(_fill_approvals(url))
    done = handback("audit", "--store", url, *args)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and says in done.stderr


async def test_pending_shows_tool_arguments_requester_channel_age_expiry(store_url: str) -> None:
    await _fill_approvals(store_url)
    table = handback("pending", "--store", store_url)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "expires", "age", "kind", "tool", "arguments", "requester", "channel", "interaction"
    ]  # fmt: skip
    deploy = next(line for line in lines if "int_deploy" in line)
    assert "approval" in deploy and "deploy" in deploy and '"env":"prod"' in deploy
    assert "U0ALICE" in deploy and "C0OPS" in deploy and " 1h " in deploy
    assert "sk-live-SECRET" not in table.stdout and "[redacted]" in deploy
    # A terminal escape in an argument is shown, not obeyed.
    assert "\x1b" not in table.stdout and "\x07" not in table.stdout
    assert "\\u001b[2J" in deploy

    as_json = handback("pending", "--store", store_url, "--json")
    views = {v["interaction_id"]: v for v in map(json.loads, as_json.stdout.splitlines())}
    view = views["int_deploy"]
    assert view["tool"] == "deploy" and view["kind"] == "approval"
    assert view["arguments"]["env"] == "prod" and view["arguments"]["api_token"] == "[redacted]"
    assert view["requester"] == "U0ALICE" and view["channel"] == "C0OPS"
    assert 3590 < view["age_seconds"] < 3700 and view["expires_at"] > time.time()
    assert "sk-live-SECRET" not in as_json.stdout and "\x1b" not in as_json.stdout


def test_dev_prints_a_store_that_audit_reads() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "bot._cli", "dev", "--no-browser", "--port", "0"],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            banner = []
            for line in process.stdout:
                banner.append(line)
                if "Ctrl+C" in line:
                    break
            (store,) = [line for line in banner if line.startswith("  store: ")]
            assert not any("model: model:" in line for line in banner)
            url = store.split()[1]
            done = handback("audit", "--store", url)
            assert done.returncode == 0, done.stderr
            assert done.stdout == "The audit log is empty.\n"
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)
