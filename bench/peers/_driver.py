"""What every contender's driver shares (standard library only, so it runs in every venv).

A driver is `<venv>/bin/python bench/peers/<peer>/driver.py --contender C --measure M [...]`;
it prints exactly one JSON line on stdout (its result) as its last line. `compare.py` runs the
drivers in rounds and reads that line. Every driver scripts the same conversation:

- the cycle: the user says `PROMPT`; the model calls `ask_user(**QUESTION)`; the run pauses;
  it is resumed with `ANSWER`; the model, called a second time, answers `FINAL`;
- a thread of N earlier messages: N/2 turns of `history_prompt(i)` answered by `HISTORY_REPLY`
  (no tool call), before the cycle.

Every cycle starts a new conversation (or, in the resume measure, continues the thread of N
messages it was asked in, and nothing else): each driver's scripted model reports what it was
shown when the cycle's prompt reached it (`saw_prompt`), and `timed`, `throughput` and
`check_cycle` fail any cycle whose first model call saw more than the prompt and the thread's
earlier messages. A framework that quietly carried one cycle's conversation into the next would
be timed on an ever longer conversation, which is not the agreed work.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

__all__ = [
    "ANSWER",
    "FINAL",
    "HISTORY_REPLY",
    "MEASURES",
    "PROMPT",
    "QUESTION",
    "arguments",
    "check_cycle",
    "check_fresh",
    "emit",
    "history_prompt",
    "is_history_prompt",
    "saw_prompt",
    "sqlite_payload_bytes",
    "sqlite_setting",
    "throughput",
    "timed",
]

PROMPT = "set up my database"
QUESTION: dict[str, Any] = {"question": "Which database?", "options": ["postgres", "mysql"]}
ANSWER = "postgres"
FINAL = "using postgres"
HISTORY_REPLY = "Noted. The orders database looks healthy: replication lag 0.2 s, disk 41 % used."

MEASURES = ("cycle", "click", "burst", "trips", "bytes", "resume", "throughput")

WARMUP = 20
"""Untimed cycles before timing: imports, caches, connections, SQLite pages, scripts."""


def history_prompt(i: int) -> str:
    """The i-th earlier user message of a thread (about 150 characters)."""
    return f"message {i}: please look at the orders database and tell me whether anything is off"


def is_history_prompt(text: str) -> bool:
    return text.startswith("message ")


_prompt_seen: list[int] = []
"""How many messages the model was shown each time the cycle's prompt reached it, since the
last `check_fresh`."""


def saw_prompt(messages: int) -> None:
    """Called by a driver's scripted model whenever `PROMPT` is the last message it is shown,
    with the number of messages it was shown (system instructions aside)."""
    _prompt_seen.append(messages)


def check_fresh(cycles: int = 1, *, earlier: int = 0) -> None:
    """Fail unless, since the last check, the model was shown the cycle's prompt `cycles` times,
    each time after exactly `earlier` earlier messages: every cycle is a new conversation (or a
    new turn of a thread of `earlier` messages), not the previous cycle's grown longer."""
    seen = sorted(_prompt_seen)
    _prompt_seen.clear()
    if seen != [earlier + 1] * cycles:
        shown = seen if len(seen) <= 8 else [*seen[:4], "...", *seen[-4:]]
        raise AssertionError(
            f"a cycle did not start a new conversation: its first model call should see "
            f"{earlier + 1} message(s), {cycles} time(s); it saw {shown} ({len(seen)} calls)"
        )


def arguments(contenders: Sequence[str], description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--contender", required=True, choices=list(contenders))
    parser.add_argument("--measure", required=True, choices=MEASURES)
    parser.add_argument("--n", type=int, default=200, help="timed samples (cycles, clicks)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument(
        "--messages", default="2", help="earlier messages in the thread, comma-separated sizes"
    )
    parser.add_argument(
        "--budget", type=float, default=4.0, help="seconds of timing at most (10 samples at least)"
    )
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    args.sizes = [int(size) for size in str(args.messages).split(",")]
    # Frameworks that log per run would be measured logging; every contender logs warnings only.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return args


def emit(**result: Any) -> None:
    """The driver's one result line (times rounded to the microsecond)."""
    line = json.dumps(_rounded(result), default=str, separators=(",", ":"))
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def check_cycle(
    *, questions: int, answers: int, output: str, model_calls: int, earlier: int = 0
) -> None:
    """Fail loudly unless a cycle did the agreed work: one question, one answer, one final
    output, the model called twice, the first time shown only the prompt (and the thread's
    `earlier` messages)."""
    check_fresh(earlier=earlier)
    got = {"questions": questions, "answers": answers, "output": output, "model_calls": model_calls}
    want = {"questions": 1, "answers": 1, "output": FINAL, "model_calls": 2}
    if got != want:
        raise AssertionError(f"the cycle did other work than agreed: got {got}, want {want}")


async def timed(
    n: int,
    once: Callable[[int], Awaitable[object]],
    *,
    budget: float,
    prepare: Callable[[int], Awaitable[Any]] | None = None,
    warmup: int = WARMUP,
    earlier: int = 0,
) -> list[float]:
    """`once(i)` run `warmup` times untimed, then `n` times (or fewer, at least 10, once
    `budget` seconds have gone by); milliseconds of each timed call.

    With `prepare`, `once` gets what `prepare(i)` returned, and only `once` is timed. The
    garbage collector runs between calls, not inside them, for every contender alike. After
    each call (untimed), `check_fresh(earlier=earlier)`: each is one cycle of its own.
    """

    async def run(i: int) -> float:
        arg = await prepare(i) if prepare else i
        start = time.perf_counter()
        await once(arg)
        elapsed = (time.perf_counter() - start) * 1000
        check_fresh(earlier=earlier)
        return elapsed

    for i in range(warmup):
        await run(-1 - i)
    samples: list[float] = []
    gc.collect()
    gc.disable()
    began = time.perf_counter()
    try:
        for i in range(n):
            samples.append(await run(i))
            if i % 50 == 49:
                gc.collect()
            if i >= 9 and time.perf_counter() - began > budget:
                break
    finally:
        gc.enable()
    return samples


async def throughput(
    concurrency: int, total: int, once: Callable[[int], Awaitable[object]]
) -> float:
    """Complete cycles per second with `concurrency` runs in flight on one event loop.

    `concurrency` tasks each run cycles one after another until `total` (at least one per
    task) have completed; then `check_fresh` for all of them (each a new conversation).
    """
    per_task = max(1, total // concurrency)
    for i in range(min(WARMUP, total)):
        await once(-1 - i)
    check_fresh(min(WARMUP, total))

    async def worker(w: int) -> None:
        for k in range(per_task):
            await once(w * per_task + k)

    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    rate = concurrency * per_task / (time.perf_counter() - start)
    check_fresh(concurrency * per_task)
    return rate


def sqlite_payload_bytes(path: str) -> dict[str, int]:
    """Bytes of every value stored in an SQLite file, per table (rowid and page overhead not
    counted): what the contender chose to write, comparable across schemas."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        sizes = {}
        for table in tables:
            columns = [row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')]
            if not columns:
                continue
            total = " + ".join(f'COALESCE(LENGTH(CAST("{c}" AS BLOB)), 0)' for c in columns)
            sizes[table] = int(
                conn.execute(f'SELECT COALESCE(SUM({total}), 0) FROM "{table}"').fetchone()[0]
            )
        return sizes
    finally:
        conn.close()


def sqlite_setting(conn: sqlite3.Connection) -> str:
    """`journal_mode` and `synchronous` as SQLite reports them for a connection."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
        conn.execute("PRAGMA synchronous").fetchone()[0]
    ]
    return f"{mode.upper()}, synchronous={sync}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
