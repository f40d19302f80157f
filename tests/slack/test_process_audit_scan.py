"""Bot processes' stores are scanned for typed secrets when the processes are gone
(`processes.check_audit`, from `bot_processes` and `Fleet`), whatever opened the store: a
secret in the audit of a store no scanned fixture made fails the harness's exit."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from state import AuditEntry, open_store

from .._local_slack import TestSlack
from .processes import Fleet, bot_processes


async def _plant(url: str, detail: str) -> None:
    async with open_store(url) as store:
        await store.audit(AuditEntry(at=time.time(), action="refused", detail=detail))


def _unplant(path: Path, secret: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM audit WHERE rec LIKE ?", (f"%{secret}%",))
    conn.close()


async def test_a_secret_in_a_process_stores_audit_fails_the_harness_exit(tmp_path: Path) -> None:
    path = tmp_path / "own.db"  # not a fixture's: only the harness scans it
    url = f"sqlite:///{path}"
    async with TestSlack() as slack:
        async with bot_processes(slack, url) as bots:
            assert bots[0].alive  # a clean exit passes
        with pytest.raises(AssertionError, match="hunter2-by-a-process"):
            async with bot_processes(slack, url):
                await _plant(url, "ran /deploy token=hunter2-by-a-process")
        with pytest.raises(AssertionError, match="hunter2-in-a-fleet"):
            async with Fleet(slack, url, ref="tests.slack.agents:approval_agent") as fleet:
                _unplant(path, "hunter2-by-a-process")
                await fleet.start("all")
                await _plant(url, "ran /deploy token=hunter2-in-a-fleet")
        _unplant(path, "hunter2-in-a-fleet")
