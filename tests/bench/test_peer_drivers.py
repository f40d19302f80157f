"""Smoke test of the benchmark drivers: each contender of each measure runs once, through
`bench/compare.py`'s own plumbing, and must pass its driver's agreed-work check, so no driver rots
between full runs.

Marked `peers` and left out of the default run: it installs the peers (the seed's framework,
LangGraph, a bare Bolt) from the package index into `$HANDBACK_BENCH_CACHE` on first use.
`.ci/run` runs it as a step of its own: `python -m pytest -m peers tests/bench`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import compare  # noqa: E402

pytestmark = [pytest.mark.peers, pytest.mark.redis]

# One sample, the smallest thread, no timing budget to speak of: the point is that each driver
# runs its checked cycle, not how fast.
_SMOKE = {"--n": "1", "--budget": "0.01", "--concurrency": "1", "--messages": "2"}


def _smoke_args(args: list[str]) -> list[str]:
    out = list(args)
    for flag, value in _SMOKE.items():
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


def _cases() -> list[tuple[compare.Job, compare.Contender]]:
    seen: set[tuple[str, str]] = set()
    cases = []
    for job in compare.jobs(
        quick=True,
        rounds=1,
        redis_url=os.environ.get("HANDBACK_TEST_REDIS", "redis://127.0.0.1:6379/0"),
    ):
        for contender in job.contenders:
            if (job.measure, contender.label) in seen:
                continue
            seen.add((job.measure, contender.label))
            cases.append((job, contender))
    return cases


@pytest.mark.parametrize(
    ("job", "contender"), _cases(), ids=lambda v: getattr(v, "key", None) or v.label
)
def test_each_driver_runs_its_checked_cycle(
    job: compare.Job, contender: compare.Contender, redis_url: str
) -> None:
    smoke = compare.Job(
        job.key,
        job.measure,
        [contender],
        _smoke_args([redis_url if a.startswith("redis://") else a for a in job.args]),
        1,
        timeout=180.0,
    )
    result = compare.run_driver(smoke, contender, compare.venv_python(contender.peer))
    assert isinstance(result, dict) and result, f"{contender.label} printed no result"
