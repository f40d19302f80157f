"""What the durable-execution tests (issue 8) share: the marker files the test agent's tools
write, the processes' environment, and reading a thread's outcome off LocalSlack."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .._local_slack import Message, TestSlack
from .conftest import CHANNEL, Harness

T = TypeVar("T")

AGENT = "tests.slack.agents:durable_agent"

INTERRUPTED = (
    "Interrupted: the process stopped while this ran; it may or may not have taken effect."
)
"""The tool result the journal gives a call that started in a process that died."""

QUICK = {
    "HANDBACK_LIVENESS_TTL": "2s",
    "HANDBACK_SHUTDOWN_GRACE": "1s",
}
"""Leases short enough that a dead process's work is taken over within a couple of seconds."""


@dataclass
class Marks:
    """The directory the test agent's tools write their executions to (`HBTEST_DIR`)."""

    root: Path

    @classmethod
    def make(cls, tmp_path: Path) -> Marks:
        root = tmp_path / "marks"
        root.mkdir()
        return cls(root)

    @property
    def env(self) -> dict[str, str]:
        return {"HBTEST_DIR": str(self.root)}

    def lines(self, tool: str) -> list[str]:
        path = self.root / f"{tool}.log"
        return path.read_text().splitlines() if path.exists() else []

    def count(self, tool: str) -> int:
        return len(self.lines(tool))

    def pids(self, tool: str) -> list[int]:
        return [int(line.split()[0]) for line in self.lines(tool)]

    def arm(self, tool: str) -> None:
        """The tool's next execution SIGKILLs its own process (after writing its line)."""
        (self.root / f"kill-{tool}").touch()

    def armed(self, tool: str) -> bool:
        return (self.root / f"kill-{tool}").exists()

    def release(self) -> None:
        """Let every `slow` call finish."""
        (self.root / "release").touch()


async def poll(
    predicate: Callable[[], T],
    *,
    timeout: float,  # noqa: ASYNC109
    every: float = 0.05,
    what: str = "the condition",
) -> T:
    """`predicate()` once it is truthy, asked every `every` seconds until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout}s")
        await asyncio.sleep(every)


def answers(slack: TestSlack, thread_ts: str) -> list[str]:
    """The bot's plain replies in a thread (not its cards), oldest first."""
    return [m.text for m in slack.bot_messages(thread_ts=thread_ts) if not m.blocks]


def cards(slack: TestSlack, thread_ts: str) -> list[Message]:
    """Copies of the bot's cards in a thread as they are now."""
    return [copy.deepcopy(m) for m in slack.bot_messages(thread_ts=thread_ts) if m.blocks]


async def card_in(slack: TestSlack, thread_ts: str, *, timeout: float = 20.0) -> Message:  # noqa: ASYNC109
    """The thread's first card, once there is one."""
    await slack.wait_for(lambda: cards(slack, thread_ts), timeout=timeout)
    return cards(slack, thread_ts)[0]


async def answer_in(
    slack: TestSlack,
    thread_ts: str,
    *,
    count: int = 1,
    timeout: float = 20.0,  # noqa: ASYNC109
) -> list[str]:
    """The thread's plain replies once there are at least `count`."""
    await slack.wait_for(lambda: len(answers(slack, thread_ts)) >= count, timeout=timeout)
    return answers(slack, thread_ts)


def sorry(slack: TestSlack) -> list[str]:
    """Every "Sorry" the bot said, in threads or ephemerally."""
    said = [m.text for m in slack.bot_messages() if "Sorry" in m.text]
    return said + [e.text for e in slack.ephemerals if "Sorry" in e.text]


def interaction_id(card: Message) -> str:
    return Harness.interaction_id(card)


def approved_by(slack: TestSlack, card: Message, user: str) -> bool:
    now = slack.message(CHANNEL, card.ts)
    return now is not None and f"*Approved* by <@{user}>" in str(now.blocks)
