"""Group commit, the mechanism under both stores' enqueue: items submitted together share one
write, each caller returns only after the write that holds its item, and a failed write fails
every caller in it. The inbox tests check the same through the stores themselves."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

# The mechanism under both stores' enqueue, tested as a unit.
from state._group_commit import GroupCommit


class Log:
    """A write that records its batches; `hold` keeps a write running until set."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.written: list[int] = []
        self.hold = asyncio.Event()
        self.hold.set()
        self.fail: Exception | None = None

    async def write(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.hold.wait()
        if self.fail is not None:
            raise self.fail
        self.written += items
        return [item * 10 for item in items]


async def test_items_submitted_together_share_one_write() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    assert await asyncio.gather(*(commit.submit(n) for n in range(50))) == [
        n * 10 for n in range(50)
    ]
    assert log.batches == [list(range(50))]


async def test_items_submitted_during_a_write_go_in_the_next_one() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    log.hold.clear()
    first = asyncio.ensure_future(commit.submit(1))
    await asyncio.sleep(0.01)
    assert log.batches == [[1]]
    later = [asyncio.ensure_future(commit.submit(n)) for n in (2, 3, 4)]
    await asyncio.sleep(0.01)
    assert log.batches == [[1]] and not first.done()
    log.hold.set()
    assert await first == 10
    assert await asyncio.gather(*later) == [20, 30, 40]
    assert log.batches == [[1], [2, 3, 4]]


async def test_a_caller_returns_only_once_its_item_is_written() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    log.hold.clear()

    async def submit(n: int) -> None:
        await commit.submit(n)
        assert n in log.written  # its write finished before it returned

    calls = asyncio.gather(*(submit(n) for n in range(10)))
    await asyncio.sleep(0.01)
    assert log.written == []
    log.hold.set()
    await calls


async def test_a_failed_write_fails_every_caller_in_its_batch_and_no_other() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    log.fail = RuntimeError("disk is full")
    results = await asyncio.gather(*(commit.submit(n) for n in range(5)), return_exceptions=True)
    assert [str(result) for result in results] == ["disk is full"] * 5
    assert log.written == []

    log.fail = None
    assert await commit.submit(6) == 60


async def test_a_write_with_a_result_missing_fails_its_callers() -> None:
    async def short(items: Sequence[int]) -> list[int]:
        return list(items)[1:]

    commit: GroupCommit[int, int] = GroupCommit(short)
    results = await asyncio.gather(*(commit.submit(n) for n in range(3)), return_exceptions=True)
    assert all(isinstance(result, RuntimeError) for result in results)


async def test_a_caller_cancelled_before_its_write_is_never_written() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    log.hold.clear()
    running = asyncio.ensure_future(commit.submit(1))
    await asyncio.sleep(0.01)
    gone = asyncio.ensure_future(commit.submit(2))
    kept = asyncio.ensure_future(commit.submit(3))
    await asyncio.sleep(0)
    gone.cancel()
    log.hold.set()
    assert await running == 10 and await kept == 30
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert log.batches == [[1], [3]]
    assert 2 not in log.written


async def test_a_caller_cancelled_during_its_write_leaves_the_write_to_finish() -> None:
    log = Log()
    commit = GroupCommit(log.write)
    log.hold.clear()
    calls = [asyncio.ensure_future(commit.submit(n)) for n in (1, 2)]
    await asyncio.sleep(0.01)
    calls[0].cancel()
    log.hold.set()
    assert await calls[1] == 20
    assert log.written == [1, 2]


async def test_batches_hold_at_most_the_limit() -> None:
    log = Log()
    commit = GroupCommit(log.write, limit=4)
    await asyncio.gather(*(commit.submit(n) for n in range(10)))
    assert log.batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
