"""Microseconds per store call, for each store: `python bench/bench_store.py [N]`.

Measures save_run, load_run and claim_run (each on its own run, so every claim is a real win),
then one whole pause -> answer -> resume cycle as the app performs it. Redis is
`$HANDBACK_TEST_REDIS` (default redis://127.0.0.1:6379/0) under a throwaway prefix, whose keys
are deleted afterwards; SQLite is a file in a temporary directory.
"""

from __future__ import annotations

import asyncio
import sys
import time

from _stores import per_call, store_urls

from state import (
    AuditEntry,
    InteractionRecord,
    PendingCall,
    PendingInteraction,
    RunRecord,
    Store,
    open_store,
)

# Coordination records, kept out of `state.__all__`: the benchmark drives them.
from state._records import ThreadLease, TurnClaim


def run_record(run_id: str, turns: int = 10) -> RunRecord:
    """A paused run with a realistic transcript (about 4 KB of JSON at 10 turns)."""
    transcript: list[dict[str, object]] = [{"role": "system", "content": "You are ops. " * 10}]
    for n in range(turns):
        transcript.append({"role": "user", "content": f"message {n}: " + "please check db " * 8})
        transcript.append({"role": "assistant", "content": "Checking the database now. " * 6})
    return RunRecord(
        run_id=run_id,
        parent_id=None,
        agent_name="ops",
        status="paused",
        reason="input_required",
        input="restart the database",
        transcript=transcript,
        pending_calls=[PendingCall(tool_call_id="call_1", name="confirm", arguments="{}")],
        interactions=[
            PendingInteraction(
                interaction_id=f"ix-{run_id}", kind="confirm", payload={"action": "restart db"}
            )
        ],
        usage={"input_tokens": 1200, "output_tokens": 300},
        t0=int(time.time() * 1000),
    )


async def cycle(store: Store, i: int) -> None:
    """The store calls of one pause and one resume, in the order the app makes them.

    Pause: save the run, add its interaction, note where the card was posted. Resume: read the
    interaction, answer it with its audit entry, the run's claim and the thread's lease in one
    step (`answer_and_claim`, which returns the claimed run), save the child when it ends,
    release the thread's lease with the thread moved on, and mark the work item done.
    """
    run_id, child_id, ix_id = f"c-{i}", f"c-{i}-child", f"ix-c-{i}"
    now = time.time()
    run = run_record(run_id)
    await store.save_run(run)
    await store.add_interactions(
        [
            InteractionRecord.placed(
                interaction,
                run_id=run_id,
                channel="C1",
                thread_ts=None,
                requester=None,
                requesters=[],
                created_at=now,
                expires_at=now + 3600,
            )
            for interaction in run.interactions
        ]
    )
    await store.set_message(ix_id, channel="C1", message_ts="1700000000.000100")
    item_id = await store.enqueue("action", {"i": i})
    [item] = await store.take("bench", count=1)
    assert item.item_id == item_id
    assert await store.get_interaction(ix_id) is not None
    lease = ThreadLease(channel="C1", thread_ts=f"1700000000.{i:06d}", owner=f"o-{i}")
    answered = await store.answer_and_claim(
        ix_id,
        answer=True,
        answered_by="U1",
        now=now,
        audit=AuditEntry(at=now, action="answered", interaction_id=ix_id, user="U1"),
        turn=TurnClaim(run_id=run_id, child_id=child_id, lease=lease, lease_ttl=30),
    )
    assert answered.won and answered.run is not None
    child = run_record(child_id)
    child.status = "success"
    await store.save_run(child)
    await store.release_thread(lease.channel, lease.thread_ts, owner=lease.owner, run_id=child_id)
    await store.done(item.item_id)


async def bench(label: str, url: str, n: int) -> None:
    async with open_store(url) as store:
        for i in range(n + 50):
            await store.save_run(run_record(f"r-{i}"))
        figures = {
            "save_run": await per_call(n, lambda i: store.save_run(run_record(f"s-{i}"))),
            "load_run": await per_call(n, lambda i: store.load_run(f"r-{i}")),
            "claim_run": await per_call(n, lambda i: store.claim_run(f"r-{i}", child_id="c")),
            "pause->resume cycle": await per_call(n, lambda i: cycle(store, i)),
        }
    print(f"{label:7s} " + "  ".join(f"{name} {us:7.1f} µs" for name, us in figures.items()))


async def main(n: int) -> None:
    print(f"{n} calls each; a run is ~4 KB of JSON")
    async with store_urls() as urls:
        for label, url in urls:
            await bench(label, url, n)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000))
