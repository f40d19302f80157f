"""A run paused in one OS process resumes in another, from Redis and from SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_process(store_url: str, *args: str) -> dict[str, object]:
    env = {**os.environ, "HANDBACK_STORE": store_url, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.runtime.durable_agent", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_pause_in_one_process_resume_in_another(store_url: str) -> None:
    paused = run_process(store_url, "ask")
    pending = paused["pending"]
    assert isinstance(pending, dict) and set(pending) == {"approval", "ask_user"}
    answers = {pending["approval"]: True, pending["ask_user"]: "prod"}
    result = run_process(store_url, "resume", str(paused["run_id"]), json.dumps(answers))
    assert result == {"status": "success", "output": "finished: deployed api | prod"}
    # The same paused run cannot be resumed a second time, from any process.
    env = {**os.environ, "HANDBACK_STORE": store_url, "PYTHONPATH": str(ROOT)}
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.runtime.durable_agent",
            "resume",
            str(paused["run_id"]),
            json.dumps(answers),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert again.returncode != 0 and "RunAlreadyResumed" in again.stderr


def test_a_nested_pause_resumes_in_other_processes(store_url: str) -> None:
    paused = run_process(store_url, "nested-ask")
    pending = paused["pending"]
    assert isinstance(pending, dict) and set(pending) == {"approval", "ask_user"}
    # Two separate resumes, each in a process of its own.
    answer = json.dumps({pending["ask_user"]: "prod"})
    half = run_process(store_url, "nested-resume", str(paused["run_id"]), answer)
    assert half["status"] == "cancelled" and half["pending"] == {"approval": pending["approval"]}
    approve = json.dumps({pending["approval"]: True})
    result = run_process(store_url, "nested-resume", str(half["run_id"]), approve)
    assert result == {
        "status": "success",
        "output": "mid said: durable said: finished: prod | deployed api",
    }
