"""handback against its peers, side by side in one run: contenders interleaved in rounds.

    .venv/bin/python bench/compare.py [--quick] [--rounds 3] [--only cycle,click,...]
                                      [--write bench/RESULTS.md] [--redis redis://...]

Every contender is a driver (`bench/peers/<peer>/driver.py`) run as a subprocess in its own
virtual environment: handback's in the project's `.venv`, each peer's made on first use under
`$HANDBACK_BENCH_CACHE` (default `~/.cache/handback-bench/<peer>`) from the pinned
`bench/peers/<peer>/requirements.txt`. A round runs every contender of a measure once, one after
another (A, B, C, A, B, C, ...), so machine noise hits all alike; a table gives each contender's
median of its round medians, their spread (lowest to highest round median), and the ratio to
handback on SQLite. Each driver checks that its cycle did the agreed work before timing it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PEERS = BENCH / "peers"
CACHE = Path(os.environ.get("HANDBACK_BENCH_CACHE", "~/.cache/handback-bench")).expanduser()
BEGIN, END = "<!-- compare.py results: begin -->", "<!-- compare.py results: end -->"
REFERENCE = "handback sqlite"
BURST = 1000
"""Clicks at once on one process in the burst measure."""
BURST_P99_MS = 2000.0
"""The bound on the burst's ack p99 (issue 19): Slack's deadline is 3,000 ms."""


@dataclass(frozen=True)
class Contender:
    peer: str
    name: str

    @property
    def label(self) -> str:
        return f"{self.peer} {self.name}"


HB_WEB = [Contender("handback", "sqlite-web"), Contender("handback", "redis-web")]
HB_SQLITE, HB_FULL, HB_REDIS = (
    Contender("handback", n) for n in ("sqlite", "sqlite-full", "redis")
)
TIMBAL = [Contender("timbal", "memory"), Contender("timbal", "sqlite")]
LANGGRAPH = [Contender("langgraph", "memory"), Contender("langgraph", "sqlite")]
BOLT = Contender("bolt", "bare")
IN_PROCESS = [HB_SQLITE, HB_REDIS, *TIMBAL, *LANGGRAPH]


@dataclass
class Job:
    """One measure: which contenders, the driver's arguments, how many rounds."""

    key: str
    measure: str
    contenders: list[Contender]
    args: list[str]
    rounds: int
    timeout: float = 300.0
    results: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def jobs(quick: bool, rounds: int, redis_url: str) -> list[Job]:
    """The measures of a full run (`quick`: one round, fewer samples, threads up to 20)."""
    r = 1 if quick else rounds
    n = ["--n", "50" if quick else "200"]
    at = ["--redis", redis_url, "--budget"]
    short, long = [*at, "1"] if quick else [*at, "1.5"], [*at, "3"]
    clicks = ["--n", "20" if quick else "100"]
    sizes = ["--messages", "2,20" if quick else "2,20,200"]
    clickers = [HB_SQLITE, HB_REDIS, *HB_WEB, BOLT]
    return [
        # The cheapest measure gets two more rounds: its sub-millisecond differences (NORMAL vs
        # FULL) are the ones a busy machine blurs most.
        Job(
            "cycle",
            "cycle",
            [HB_SQLITE, HB_FULL, HB_REDIS, *TIMBAL, *LANGGRAPH],
            [*short, *n],
            r if quick else r + 2,
        ),
        Job("click-1", "click", clickers, [*short, *clicks, "--concurrency", "1"], r),
        Job("click-50", "click", clickers, [*short, *clicks, "--concurrency", "50"], r),
        # One burst per round is a thousand cards made (about a minute each on SQLite and
        # Redis) and then a thousand clicks at once: one round, even in a full run.
        Job(
            "burst",
            "burst",
            [HB_SQLITE, HB_REDIS, BOLT],
            ["--redis", redis_url, "--n", "200" if quick else str(BURST)],
            1,
            timeout=900.0,
        ),
        Job("trips", "trips", [HB_SQLITE, HB_REDIS], [*short, "--n", "10"], 1),
        Job("bytes", "bytes", [HB_SQLITE, HB_REDIS, TIMBAL[1], *LANGGRAPH], short, 1),
        Job("resume", "resume", IN_PROCESS, [*long, *n, *sizes], r),
        Job(
            "throughput-50",
            "throughput",
            IN_PROCESS,
            [*short, "--n", "100", "--concurrency", "50"],
            r,
        ),
        # 1,000 concurrent runs, in rounds like the rest: a round costs about a minute on an
        # idle 2-core machine, 40 s of it the SQLite peers (1,000 cycles at 40-70 a second),
        # which a quick run leaves out to stay under two minutes.
        Job(
            "throughput-1000",
            "throughput",
            [HB_SQLITE, HB_REDIS, TIMBAL[0], LANGGRAPH[0]] if quick else IN_PROCESS,
            [*short, "--n", "1000", "--concurrency", "1000"],
            r,
            timeout=600.0,
        ),
    ]


# ------------------------------------------------------------------ environments


def venv_python(peer: str) -> Path:
    """The interpreter for a peer's driver; the peer's venv is made or updated on first use."""
    if peer == "handback":
        return Path(sys.executable)
    requirements = PEERS / peer / "requirements.txt"
    venv = CACHE / peer
    stamp = venv / "handback-bench-requirements.txt"
    wanted = requirements.read_text()
    python = venv / "bin" / "python"
    if stamp.exists() and stamp.read_text() == wanted and python.exists():
        return python
    print(f"setting up {venv} from {requirements.relative_to(ROOT)} ...", file=sys.stderr)
    if not python.exists():
        base = getattr(sys, "_base_executable", sys.executable)
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    stamp.write_text(wanted)
    return python


def run_driver(job: Job, contender: Contender, python: Path) -> dict[str, Any]:
    command = [
        str(python),
        str(PEERS / contender.peer / "driver.py"),
        "--contender",
        contender.name,
        "--measure",
        job.measure,
        *job.args,
    ]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=job.timeout, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {job.timeout:.0f} s") from None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"exit {done.returncode}: {tail}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


# ------------------------------------------------------------------ the machine


def fsync_ms(samples: int = 100) -> float:
    """Median time of a 4 KiB write + fsync in the temporary directory (where every SQLite
    contender keeps its file)."""
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        fd = os.open(Path(tmp) / "probe", os.O_WRONLY | os.O_CREAT)
        try:
            for _ in range(samples):
                os.write(fd, b"x" * 4096)
                start = time.perf_counter()
                os.fsync(fd)
                times.append((time.perf_counter() - start) * 1000)
        finally:
            os.close(fd)
    return statistics.median(times)


def code_state() -> str:
    """The commit, and a digest of uncommitted changes to the code under test (other engineers
    may change it while a run goes on)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout

    commit = git("rev-parse", "--short", "HEAD").strip()
    changes = git("diff", "HEAD", "--", "bot", "state", "blocks")
    changes += git("ls-files", "--others", "--exclude-standard", "--", "bot", "state", "blocks")
    if not changes:
        return commit
    digest = hashlib.sha256(changes.encode()).hexdigest()[:8]
    return f"{commit} plus uncommitted changes to bot/state/blocks (digest {digest})"


def snapshot_code() -> Path:
    """A copy of the code under test, which every handback driver of the run imports
    (`$HANDBACK_BENCH_CODE`): the working tree may change while the run goes on."""
    dest = CACHE / "code"
    shutil.rmtree(dest, ignore_errors=True)
    for package in ("bot", "state", "blocks"):
        shutil.copytree(
            ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return dest


def machine(redis_url: str) -> dict[str, str]:
    client = redis.Redis.from_url(redis_url)
    try:
        info = client.info("server")
        config = {
            **client.config_get("appendonly"),
            **client.config_get("appendfsync"),
            **client.config_get("save"),
        }
    finally:
        client.close()
    save = config.get("save") or "none"
    return {
        "cores": str(os.cpu_count()),
        "load (1/5/15 min) at start": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
        "Python": platform.python_version(),
        "SQLite": sqlite3.sqlite_version,
        "Redis": f"{info['redis_version']} on loopback; appendonly={config.get('appendonly')}, "
        f"appendfsync={config.get('appendfsync')}, save={save!r}",
        "fsync (4 KiB write, temp dir)": f"{fsync_ms():.3f} ms median",
        "handback code measured": f"{code_state()}, copied when the run began",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# ------------------------------------------------------------------ reducing


def median_spread(values: list[float]) -> tuple[float, float, float]:
    return statistics.median(values), min(values), max(values)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def p99(values: list[float]) -> float:
    return percentile(values, 0.99)


def fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(values: list[float]) -> str:
    mid, low, high = median_spread(values)
    return fmt(mid) if len(values) == 1 else f"{fmt(mid)} ({fmt(low)}–{fmt(high)})"


def ratio(value: float, reference: float | None) -> str:
    if not reference:
        return "–"
    return f"{value / reference:.2f}×"


def per_round(job: Job, label: str, pick: Callable[[dict[str, Any]], float]) -> list[float]:
    return [pick(result) for result in job.results.get(label, [])]


def errors_of(job: Job) -> list[str]:
    return [f"- {label}: could not run ({error})" for label, error in job.errors.items()]


def table_cycle(job: Job) -> list[str]:
    rows = [
        "| contender | ms per cycle, median (round spread) | × handback sqlite | "
        "store calls per cycle | what it persists |",
        "| --- | --- | --- | --- | --- |",
    ]
    meds = {
        c.label: per_round(job, c.label, lambda r: statistics.median(r["samples"]))
        for c in job.contenders
    }
    ref = statistics.median(meds[REFERENCE]) if meds.get(REFERENCE) else None
    for c in job.contenders:
        if not meds.get(c.label):
            continue
        first = job.results[c.label][0]
        rows.append(
            f"| {c.label} | {cell(meds[c.label])} | "
            f"{ratio(statistics.median(meds[c.label]), ref)} | "
            f"{first.get('store_calls', 0):.0f} | {first['persists']} |"
        )
    return rows + errors_of(job)


def table_click(job: Job, concurrency: int) -> list[str]:
    rows = [
        f"| contender ({concurrency} concurrent) | ack p50 ms | ack p99 ms | ack p50 × handback "
        "sqlite | answer posted p50 ms | answer posted p99 ms | what it does for a click |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    ack50 = {
        c.label: per_round(job, c.label, lambda r: statistics.median(r["samples"]["ack"]))
        for c in job.contenders
    }
    ref = statistics.median(ack50[REFERENCE]) if ack50.get(REFERENCE) else None
    for c in job.contenders:
        if not ack50.get(c.label):
            continue
        ack99 = per_round(job, c.label, lambda r: p99(r["samples"]["ack"]))
        has_answer = "answer" in job.results[c.label][0]["samples"]
        ans50 = (
            per_round(job, c.label, lambda r: statistics.median(r["samples"]["answer"]))
            if has_answer
            else []
        )
        ans99 = per_round(job, c.label, lambda r: p99(r["samples"]["answer"])) if has_answer else []
        rows.append(
            f"| {c.label} | {cell(ack50[c.label])} | {cell(ack99)} | "
            f"{ratio(statistics.median(ack50[c.label]), ref)} | "
            f"{cell(ans50) if ans50 else 'n/a (acks only)'} | {cell(ans99) if ans99 else '–'} | "
            f"{job.results[c.label][0].get('does', '')} |"
        )
    return rows + errors_of(job)


def table_burst(job: Job) -> list[str]:
    rows = [
        "| contender | clicks at once | ack p50 ms | ack p95 ms | ack p99 ms | p99 below "
        f"{BURST_P99_MS:,.0f} ms | acked but not recorded (clicked again) | all answered after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in job.contenders:
        for result in job.results.get(c.label, []):
            acks = result["samples"]["ack"]
            worst = percentile(acks, 0.99)
            again = result.get("not_recorded")
            after = result.get("all_answered_s")
            lost = result.get("never_recorded")
            retried = " then ".join(map(str, again)) if again else ("0" if again == [] else "–")
            if lost:
                retried += f" (**{lost} never recorded**)"
            rows.append(
                f"| {c.label} | {len(acks):,} | {fmt(percentile(acks, 0.5))} | "
                f"{fmt(percentile(acks, 0.95))} | {fmt(worst)} | "
                f"{'yes' if worst < BURST_P99_MS else '**no**'} | "
                f"{retried} | "
                f"{f'{after:.1f} s' if after is not None else 'n/a (acks only)'} |"
            )
    return rows + errors_of(job)


def table_trips(job: Job) -> list[str]:
    rows = []
    idle = "take (found nothing)"
    for c in job.contenders:
        if c.label not in job.results:
            continue
        counts = job.results[c.label][0]["counts"]
        calls = counts["store_calls"]
        listed = ", ".join(f"`{k}` {fmt(v)}" for k, v in calls.items() if k != idle)
        total = sum(v for k, v in calls.items() if k != idle)
        rows.append(f"- **{c.label}**: {fmt(total)} store calls per click: {listed}")
        if calls.get(idle):
            rows.append(
                f"  - not counted above: {fmt(calls[idle])} `take` per click that found the inbox"
                " empty (`drain()` learning it is idle; a running worker waits in one blocking"
                " take instead)"
            )
        commands = counts.get("redis_commands")
        if commands:
            listed = ", ".join(f"`{k}` {fmt(v)}" for k, v in commands.items())
            rows.append(
                f"  - Redis `MONITOR`, this store's connections only: "
                f"{fmt(sum(commands.values()))} commands (round trips) per click: {listed}"
            )
    return rows + errors_of(job)


def table_bytes(job: Job) -> list[str]:
    rows = [
        "| contender | one pending interaction | thread of 2 messages | 20 messages | "
        "200 messages | × handback sqlite (pending / 200) | counted as |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    slack = []
    ref = job.results.get(REFERENCE, [{}])[0].get("bytes", {})

    def payload(got: dict[str, Any], key: str) -> float:
        return float(got.get(key, {}).get("payload", 0))

    for c in job.contenders:
        if c.label not in job.results:
            continue
        got = job.results[c.label][0]["bytes"]

        def size(key: str, got: dict[str, Any] = got) -> str:
            entry = got.get(key, {})
            text = f"{entry.get('payload', 0):,}"
            if "redis_memory_usage" in entry:
                text += f" ({entry['redis_memory_usage']:,} in RAM)"
            return text

        how = (
            "value bytes; Redis `MEMORY USAGE` in brackets"
            if c.name == "redis"
            else ("value bytes held in memory" if c.name == "memory" else "value bytes in the file")
        )
        rows.append(
            f"| {c.label} | {size('pending')} | {size('thread_2')} | {size('thread_20')} | "
            f"{size('thread_200')} | {ratio(payload(got, 'pending'), payload(ref, 'pending'))}"
            f" / {ratio(payload(got, 'thread_200'), payload(ref, 'thread_200'))} | {how} |"
        )
        if "pending_slack" in got:
            slack.append(f"- {c.label}: {size('pending_slack')} bytes")
    if slack:
        rows += [
            "",
            "Everything handback's store holds while one Slack card waits (mention -> "
            "card; run, interaction, thread map, dedupe marks):",
            *slack,
        ]
    return rows + errors_of(job)


def table_resume(job: Job) -> list[str]:
    sizes: list[str] = []
    for results in job.results.values():
        for key in results[0]["samples"]:
            if key not in sizes:
                sizes.append(key)
    head = " | ".join(f"{s} earlier messages" for s in sizes)
    rows = [
        f"| contender | {head} | × handback sqlite at {sizes[-1] if sizes else '?'} |",
        "| --- | " + " | ".join("---" for _ in sizes) + " | --- |",
    ]
    last: dict[str, float] = {}
    cells: dict[str, list[str]] = {}
    for c in job.contenders:
        if c.label not in job.results:
            continue
        cells[c.label] = []
        for s in sizes:
            values = per_round(job, c.label, lambda r, s=s: statistics.median(r["samples"][s]))
            cells[c.label].append(cell(values))
            last[c.label] = statistics.median(values)
    for label, row in cells.items():
        rows.append(f"| {label} | {' | '.join(row)} | {ratio(last[label], last.get(REFERENCE))} |")
    return rows + errors_of(job)


def table_throughput(fifty: Job, thousand: Job) -> list[str]:
    rows = [
        "| contender | 50 concurrent (cycles/s) | × handback sqlite | 1,000 concurrent "
        "(cycles/s) | × handback sqlite |",
        "| --- | --- | --- | --- | --- |",
    ]

    def values(job: Job, label: str) -> list[float]:
        return per_round(job, label, lambda r: r["value"])

    refs = {
        id(job): statistics.median(values(job, REFERENCE)) if values(job, REFERENCE) else None
        for job in (fifty, thousand)
    }
    for c in fifty.contenders:
        parts = []
        for job in (fifty, thousand):
            got = values(job, c.label)
            if got:
                parts += [cell(got), ratio(statistics.median(got), refs[id(job)])]
            else:
                parts += ["–", "–"]
        rows.append(f"| {c.label} | {' | '.join(parts)} |")
    return rows + errors_of(fifty) + errors_of(thousand)


def report(done: dict[str, Job], info: dict[str, str], command: str, wall: float) -> str:
    out = [
        f"Command: `{command}` ({wall / 60:.1f} minutes of wall time).",
        "",
        "| machine | |",
        "| --- | --- |",
        *(f"| {k} | {v} |" for k, v in info.items()),
        "",
        "Times are the median over rounds of each round's median (in brackets: lowest and highest"
        " round median); ratios divide by handback sqlite's figure, so below 1× is faster or "
        "smaller than handback.",
    ]
    sections: list[tuple[str, Callable[[], list[str]]]] = []
    if "cycle" in done:
        sections.append(
            ("1. ask -> pause -> resume, in process", lambda: table_cycle(done["cycle"]))
        )
    if "click-1" in done:
        sections.append(
            (
                "2-3. click -> HTTP ack and click -> final answer posted, 1 click at a time",
                lambda: table_click(done["click-1"], 1),
            )
        )
    if "click-50" in done:
        sections.append(
            ("2-3. the same with 50 concurrent clicks", lambda: table_click(done["click-50"], 50))
        )
    if "burst" in done:
        sections.append(
            (
                "2-3. a burst of clicks at once on one process (all work in that process)",
                lambda: table_burst(done["burst"]),
            )
        )
    if "trips" in done:
        sections.append(
            ("4. store round trips per answered click", lambda: table_trips(done["trips"]))
        )
    if "bytes" in done:
        sections.append(("5. bytes stored", lambda: table_bytes(done["bytes"])))
    if "resume" in done:
        sections.append(
            (
                "6. resume time (ms) vs earlier messages in the thread",
                lambda: table_resume(done["resume"]),
            )
        )
    if "throughput-50" in done and "throughput-1000" in done:
        sections.append(
            (
                "7. complete cycles per second, one process",
                lambda: table_throughput(done["throughput-50"], done["throughput-1000"]),
            )
        )
    for title, make in sections:
        out += ["", f"### {title}", "", *make()]
    out += ["", "Rounds and driver arguments per measure:", ""]
    for job in done.values():
        rounds = max((len(v) for v in job.results.values()), default=0)
        out.append(f"- `{job.key}`: {rounds} round(s), `{' '.join(job.args)}`")
    return "\n".join(out) + "\n"


def write_results(path: Path, text: str) -> None:
    page = path.read_text() if path.exists() else f"# Benchmark results\n\n{BEGIN}\n{END}\n"
    if BEGIN not in page or END not in page:
        page += f"\n{BEGIN}\n{END}\n"
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one round, fewer samples")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated measure keys")
    parser.add_argument("--write", type=Path, help="put the tables into this results page")
    parser.add_argument(
        "--redis", default=os.environ.get("HANDBACK_TEST_REDIS", "redis://127.0.0.1:6379/0")
    )
    args = parser.parse_args()
    python = Path(sys.executable)
    shown = str(python.relative_to(ROOT)) if python.is_relative_to(ROOT) else "python"
    command = shlex.join([shown, "bench/compare.py", *sys.argv[1:]])
    started = time.perf_counter()
    info = machine(args.redis)
    os.environ["HANDBACK_BENCH_CODE"] = str(snapshot_code())
    todo = jobs(args.quick, args.rounds, args.redis)
    if args.only:
        keep = set(args.only.split(","))
        todo = [job for job in todo if job.key in keep or job.measure in keep]
    pythons: dict[str, Path] = {}
    broken: dict[str, str] = {}
    for job in todo:
        for c in job.contenders:
            if c.peer not in pythons and c.peer not in broken:
                try:
                    pythons[c.peer] = venv_python(c.peer)
                except (subprocess.CalledProcessError, OSError) as error:
                    broken[c.peer] = f"its environment could not be made: {error}"
            if c.peer in broken:
                job.errors[c.label] = broken[c.peer]
    raw: dict[str, Any] = {}
    for round_no in range(max(job.rounds for job in todo)):
        for job in todo:
            if round_no >= job.rounds:
                continue
            for c in job.contenders:
                if c.peer not in pythons or c.label in job.errors:
                    continue
                began = time.perf_counter()
                try:
                    result = run_driver(job, c, pythons[c.peer])
                except RuntimeError as error:
                    job.errors[c.label] = str(error)
                    print(
                        f"round {round_no + 1} {job.key:<16} {c.label:<22} FAILED: {error}",
                        file=sys.stderr,
                    )
                    continue
                job.results.setdefault(c.label, []).append(result)
                raw.setdefault(job.key, {}).setdefault(c.label, []).append(result)
                print(
                    f"round {round_no + 1} {job.key:<16} {c.label:<22} "
                    f"{time.perf_counter() - began:5.1f} s",
                    file=sys.stderr,
                )
    info["load (1/5/15 min) at end"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    at_end = f"{code_state()}, copied when the run began"
    if at_end != info["handback code measured"]:
        info["working tree at the end"] = (
            f"{at_end.split(',')[0]} (changed by others; not measured)"
        )
    wall = time.perf_counter() - started
    text = report({job.key: job for job in todo}, info, command, wall)
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "last-run.json").write_text(json.dumps({"machine": info, "results": raw}))
    print(text)
    if args.write:
        write_results(args.write, text)
        print(f"wrote {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
