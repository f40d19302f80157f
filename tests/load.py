"""CPU load beside a stress test: one busy process per core, bounded in time, so that "it only
fails when the machine is busy" is a failure every run can see, in CI too."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

__all__ = ["cpu_burners"]

_BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def cpu_burners(seconds: float, *, count: int | None = None) -> Iterator[list[int]]:
    """`count` processes (one per core by default) that each keep a core busy for at most
    `seconds`, killed on leaving; their pids. Bounded twice: each ends by itself, and leaving
    kills what is left, so a failed test never leaves load behind."""
    burners = [
        subprocess.Popen(
            [sys.executable, "-c", _BURN.format(seconds=float(seconds))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count if count is not None else os.cpu_count() or 1)
    ]
    try:
        yield [burner.pid for burner in burners]
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()
