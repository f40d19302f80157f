"""A real process is killed (SIGKILL) while a tool runs, or on either side of the journal's
"started" mark; the same run id, run again, finishes the work without running again what may
have taken effect, and runs what cannot have. SQLite file and Redis."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from state import open_store

from .crash_agent import Point, build, marks

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CRASHED = "Interrupted: the process stopped while this ran; it may or may not have taken effect."


_SAYS = {"in-tool": b"STARTED", "before-mark": b"MARKING", "after-mark": b"MARKED"}


async def _kill_mid_tool(
    store_url: str, run_id: str, tool: str, markers: Path, at: Point = "in-tool"
) -> None:
    """Run the crash agent in a process of its own and SIGKILL it once it stops at `at`."""
    env = {**os.environ, "HANDBACK_STORE": store_url, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "tests.runtime.crash_agent", run_id, tool, str(markers), at],
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if line.strip() != _SAYS[at]:
            await process.wait()
            pytest.fail((await process.stderr.read()).decode())
        process.send_signal(signal.SIGKILL)
        await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("tool", ["once", "again"])
async def test_killed_while_a_tool_runs(store_url: str, tmp_path: Path, tool: str) -> None:
    await _kill_mid_tool(store_url, "job-kill", tool, tmp_path)
    assert len(marks(tmp_path, "first")) == 1 and len(marks(tmp_path, tool)) == 1

    async with open_store(store_url) as store:
        saved = await store.load_run("job-kill")
        assert saved is not None and saved.status == "running"
        agent = build(tmp_path, tool, block=False, store=store)
        result = await agent(prompt="go", run_id="job-kill").collect()
        assert (await store.load_run("job-kill")).status == "success"  # type: ignore[union-attr]

    # The first call completed before the kill: its saved result is used, it never runs again.
    assert len(marks(tmp_path, "first")) == 1
    if tool == "once":
        # Not idempotent: not run again; the model is told it may or may not have happened.
        assert len(marks(tmp_path, "once")) == 1
        assert result.output == f"finished: first done | {CRASHED}"
    else:
        # Idempotent: run again exactly once, under the same idempotency key.
        first, second = marks(tmp_path, "again")
        assert first == second and first.startswith("job-kill:")
        assert result.output == "finished: first done | again did x"


async def _run_again(store_url: str, tool: str, markers: Path) -> str:
    """The killed run, run again with its id in this process: its final answer."""
    async with open_store(store_url) as store:
        saved = await store.load_run("job-kill")
        assert saved is not None and saved.status == "running"
        agent = build(markers, tool, block=False, store=store)
        result = await agent(prompt="go", run_id="job-kill").collect()
        assert (await store.load_run("job-kill")).status == "success"  # type: ignore[union-attr]
    assert isinstance(result.output, str)
    return result.output


@pytest.mark.parametrize("tool", ["once", "again"])
async def test_killed_before_the_started_mark_the_retry_runs_the_call_once(
    store_url: str, tmp_path: Path, tool: str
) -> None:
    await _kill_mid_tool(store_url, "job-kill", tool, tmp_path, at="before-mark")
    assert len(marks(tmp_path, "first")) == 1 and marks(tmp_path, tool) == []

    output = await _run_again(store_url, tool, tmp_path)

    # The mark never reached the store: nothing says the call began, and it had not.
    [key] = marks(tmp_path, tool)
    assert key.startswith("job-kill:")
    assert output == f"finished: first done | {tool} did x"
    assert len(marks(tmp_path, "first")) == 1


@pytest.mark.parametrize("tool", ["once", "again"])
async def test_killed_after_the_started_mark_the_call_counts_as_begun(
    store_url: str, tmp_path: Path, tool: str
) -> None:
    """Killed in the one moment a call is marked started and its handler not yet called (the
    store's reply on its way back): the call is reported interrupted, or run again when it is
    idempotent. Nothing else of the run happens in that moment, so it is as short as it can be."""
    await _kill_mid_tool(store_url, "job-kill", tool, tmp_path, at="after-mark")
    assert len(marks(tmp_path, "first")) == 1 and marks(tmp_path, tool) == []

    output = await _run_again(store_url, tool, tmp_path)

    if tool == "once":
        assert marks(tmp_path, "once") == []
        assert output == f"finished: first done | {CRASHED}"
    else:
        assert len(marks(tmp_path, "again")) == 1
        assert output == "finished: first done | again did x"
