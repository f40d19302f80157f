"""The shared drivers' check that each timed cycle is a new conversation: a framework that
carried one cycle's conversation into the next would be timed on ever longer conversations."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "peers"))

import _driver


def _cycle(grows: bool) -> object:
    seen = [0]

    async def once(_: object) -> None:
        # What a scripted model reports when the cycle's prompt reaches it.
        _driver.saw_prompt(1 + seen[0])
        if grows:
            seen[0] += 4  # the previous cycle's prompt, call, result and answer

    return once


def test_cycles_that_each_start_a_new_conversation_pass() -> None:
    samples = asyncio.run(_driver.timed(5, _cycle(grows=False), budget=10, warmup=2))
    assert len(samples) == 5


def test_a_cycle_that_continues_the_previous_conversation_fails() -> None:
    with pytest.raises(AssertionError, match="did not start a new conversation"):
        asyncio.run(_driver.timed(5, _cycle(grows=True), budget=10, warmup=2))


def test_throughput_fails_when_concurrent_cycles_share_a_conversation() -> None:
    with pytest.raises(AssertionError, match="did not start a new conversation"):
        asyncio.run(_driver.throughput(3, 9, _cycle(grows=True)))


def test_a_turn_in_a_thread_counts_the_threads_earlier_messages() -> None:
    _driver.saw_prompt(21)
    _driver.check_fresh(earlier=20)
    _driver.saw_prompt(1)
    with pytest.raises(AssertionError, match="should see 21 message"):
        _driver.check_fresh(earlier=20)
