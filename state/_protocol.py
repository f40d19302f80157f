"""The storage boundaries the runtime and the Slack app depend on, one Protocol each."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from ._beat import Heartbeat
from ._grant import Grant, GrantClaim
from ._inbox import WorkItem
from ._records import (
    AnswerClaim,
    AuditEntry,
    InteractionClaim,
    InteractionRecord,
    InteractionStatus,
    Nudge,
    NudgeKind,
    RunClaim,
    RunRecord,
    StopGuard,
    ThreadStop,
    ThreadTake,
    TurnClaim,
)

__all__ = [
    "AnswerStore",
    "AuditLog",
    "AuditedInteractions",
    "Backlog",
    "CallQueue",
    "CardWork",
    "ClickStore",
    "ConversationStore",
    "GrantStore",
    "GrantWork",
    "HomeReads",
    "HomeViewers",
    "Inbox",
    "InboxWork",
    "InteractionStore",
    "RecoveryStore",
    "ReplyStore",
    "Routing",
    "RunStore",
    "StopWork",
    "Store",
    "ThreadRuns",
    "ThreadWork",
]


@runtime_checkable
class RunStore(Protocol):
    """Runs of the agent runtime: saved when they pause and when they end."""

    async def save_run(
        self,
        run: RunRecord,
        *,
        stop: StopGuard | None = None,
        then: Callable[[], None] | None = None,
    ) -> bool:
        """Insert or replace the run (one round trip); True.

        `then()`, when given, is called once the write is durable and before this returns,
        with no other store call, no wait for another turn of the event loop and no other
        I/O in between (the journal starts a tool's handler so, after its "started" mark);
        not when nothing was written. On SQLite that means the commit is made on the event
        loop's thread; on Redis it is the step of the task that reads the reply.

        With `stop` (the journal's started mark), nothing is written and False comes back when
        the thread keeps a stop mark other than `run.stop_seen`, read in the same atomic step:
        a stopped turn's tool never starts.

        A layout-2 run's messages after its `base` are appended to its transcript log in the
        same atomic step, only those the log does not hold yet. When the log holds other
        messages there, nothing is written and the run is saved as layout 1 (a second round
        trip), which `run` then says (`layout`, `transcript_id`, `base`).
        """

    async def load_run(self, run_id: str) -> RunRecord | None:
        """One read, with the run's transcript (from its log for layout 2); None when there is
        no such run."""

    async def claim_run(
        self, run_id: str, *, child_id: str, stop: StopGuard | None = None, read: bool = False
    ) -> RunClaim:
        """Atomically mark a paused, unclaimed run as resumed by `child_id` (one round trip).

        With `read` (a resume that has not read the run yet), the run comes back whole, as
        `load_run` reads it, transcript included, won or lost, and the claim is checked against
        the stop of the run's own turn as `stop=StopGuard(...)` for its `thread` would be (so
        `stop` must not be given too); a run whose record does not read is not claimed and fails
        with `CorruptRecordError`. One round trip for a run outside a thread (Redis makes a
        second, with the thread's stop mark among its keys, for one in a thread).

        With `stop` (a resume of the turn's own requests), an unclaimed run whose turn was
        stopped since it began loses, with that stop in `stopped`, in the same step; a claim the
        same child holds already is won again (what it may still run is the journal's to
        refuse).

        Won only when the run exists, its status is `paused` and `resumed_by` is unset or is
        `child_id` already: claiming again with the same child wins again (a retried work item
        derives the same child id and must continue the work it started), any other child loses.
        A lost claim returns the stored run unchanged, so the caller can name the winner.
        """

    async def release_run(self, run_id: str, *, child_id: str) -> bool:
        """Give back a claim `child_id` holds on a run that is still paused (one round trip):
        unclaimed again, as before the claim, so a resume that refused its answers after
        `claim_run(read=True)` leaves the run as it found it. False, changing nothing, when the
        run is gone, no longer paused, or claimed by another child or by none."""


@runtime_checkable
class InteractionStore(Protocol):
    """Pending interactions with the place their card was posted."""

    async def add_interactions(self, records: list[InteractionRecord]) -> list[InteractionRecord]:
        """Insert records atomically (one round trip) and return each as stored after the add,
        in the order given.

        A new id is stored as given (without nudge marks: `unfired`). An id already stored is
        replaced only while it is still pending (a run paused again on it), and then carries
        over the stored record's `message_ts`, `created_at` and `expires_at` (its card stays,
        its deadline and nudges do not move) and the nudges that already fired. An id no longer
        pending (answered, under a grant or not; expired; closed) is kept and returned as
        stored. So the caller learns which cards exist and which requests were answered already
        without reading them first.
        """

    async def get_interaction(self, interaction_id: str) -> InteractionRecord | None: ...

    async def run_interactions(self, run_id: str) -> list[InteractionRecord]:
        """Every interaction of the run, in the order they were added."""

    async def set_message(self, interaction_id: str, *, channel: str, message_ts: str) -> None:
        """Record where the card was posted."""

    async def answer_and_claim(
        self,
        interaction_id: str,
        *,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry | Sequence[AuditEntry],
        turn: TurnClaim | None = None,
        needed: int = 1,
        stop: StopGuard | None = None,
    ) -> AnswerClaim:
        """Move a pending, unexpired interaction to `answered`, writing `audit` when it wins,
        and with `turn` also the resume's claims, all in one atomic step (one round trip).

        Lost when the interaction is missing, no longer pending, or `expires_at <= now`; the
        record comes back as stored so the caller can say who answered or that it expired. A
        late answer changes nothing: the expiry sweep stays the one place that closes it.

        With `turn`, a won answer also claims the run (`claim_run(turn.run_id,
        child_id=turn.child_id)`) and takes the thread's lease for `turn.lease.owner` when: the
        interaction belongs to `turn.run_id` and is the only one of that run (so nothing else is
        pending), the run is paused and unclaimed, and the lease is free or already that
        owner's. Either all three happen or none; the run comes back claimed in `run`, and
        with it the thread's stop mark as it was then (`stop`), for the turn the claim starts.

        `needed` > 1 makes the answer one vote of that many distinct people (the two-person
        rule): `answer` must be a JSON object and `audit` holds `needed` entries, the k-th
        written with the k-th vote. A vote by someone not yet in `record.votes` is added there
        (won); while fewer than `needed` are in, the interaction stays pending and nothing else
        changes (`partial`). The `needed`-th answers it with `answer` plus `"approvers"`, every
        voter's id in vote order, and claims the turn as above. A repeated vote changes nothing
        and loses; the record it returns lists that person among its `votes`.

        With `stop`, an answer to a run whose turn was stopped since it began loses and changes
        nothing, with that stop in `stopped` (checked before the vote counting and the rule).

        Fails closed: an Approve (`True`, or an object whose `approved` is true) of an approval
        whose stored rule asks for another number of approvers than `needed` (or whose rule does
        not read back) loses and changes nothing; the record comes back still pending.
        """

    async def close_interaction(
        self, interaction_id: str, *, status: InteractionStatus, now: float
    ) -> InteractionClaim:
        """Atomically move a pending interaction to `expired`, `superseded` or `cancelled`."""

    async def due_interactions(self, now: float, *, limit: int = 100) -> list[InteractionRecord]:
        """Pending interactions whose `expires_at <= now`, oldest first."""

    async def due_nudges(self, now: float, *, limit: int = 100) -> list[Nudge]:
        """Pending, unexpired approvals whose reminder (or, once reminded, escalation) is due at
        `now`, soonest due first. Due times are fixed when the record is added (`nudge_times`:
        `created_at + remind_after`, and `escalation_delay` after that; a pending record added
        again keeps its `created_at`, so they do not move), and never listed again once fired."""

    async def mark_nudged(
        self, interaction_id: str, kind: NudgeKind, *, now: float
    ) -> InteractionClaim:
        """Atomically record that the interaction's reminder (`reminded_at`) or escalation
        (`escalated_at`) fired at `now` (one round trip).

        Won exactly once per kind: only while the interaction is pending with `expires_at > now`,
        its `kind` is due by `now`, not fired before, and for an escalation only after the
        reminder. The record comes back as stored.
        """

    async def withdraw_answer(
        self,
        interaction_id: str,
        *,
        answered_by: str,
        run_id: str,
        audit: AuditEntry | Sequence[AuditEntry],
        voters: Sequence[str] | None = None,
    ) -> InteractionClaim:
        """Atomically take back an answer that no longer counts (its approver lost the right to
        approve before the run resumed): the interaction goes back to `pending` (its answer,
        `answered_by` and `answered_at` cleared; its expiry and nudges as before) and `audit` is
        written, in one step.

        Won only when the interaction is `answered` by `answered_by`, belongs to `run_id`, and
        that run is still `paused` and unclaimed: an answer the run has resumed with is final.

        An answer of several votes (the two-person rule) is taken back for `voters` (default:
        `answered_by` alone): their votes leave `votes`, everyone else's stay, so it reopens
        with the remaining valid votes; `audit` holds one entry per voter. Lost (nothing
        written) unless each of `voters` has a vote in it. An answer without votes can only be
        taken back for `answered_by` alone.
        """

    async def withdraw_vote(
        self, interaction_id: str, *, user: str, audit: AuditEntry
    ) -> InteractionClaim:
        """Atomically take one person's vote back from a pending interaction (their approval no
        longer counts): their entry leaves `votes` and `audit` is written, in one step (one
        round trip). Lost (nothing written) when the interaction is not `pending` or `user` has
        no vote in it; the record comes back as stored."""

    async def pending_count(self) -> int:
        """How many interactions wait for an answer (one cheap read, for the metrics)."""

    async def pending_interactions(self, *, limit: int = 100) -> list[InteractionRecord]:
        """Up to `limit` interactions still `pending`, the soonest to expire first (what an
        App Home inbox lists; one expired but not yet swept is included: the reader decides)."""

    async def settled_runs(self, *, limit: int = 100, after: str | None = None) -> list[str]:
        """Ids of runs that wait for nothing any more but were never resumed, in id order.

        Such a run is `paused` and unclaimed, has at least one interaction of its own (as
        `run_interactions` lists them), and none of those is `pending`: every one was answered or
        closed. A crash between the last answer (or an expiry) and the resume leaves exactly
        that. Ids come after `after`, so passing the last id of a page gives the next one.
        """


@runtime_checkable
class ConversationStore(Protocol):
    """Slack threads mapped to the last run, leases that serialise a thread's turns across
    processes, and delivered events seen once."""

    async def set_thread_run(self, channel: str, thread_ts: str, run_id: str) -> None: ...

    async def get_thread_run(self, channel: str, thread_ts: str) -> str | None: ...

    async def acquire_thread(self, channel: str, thread_ts: str, *, owner: str, ttl: float) -> bool:
        """Take the thread's lease for `owner` for `ttl` seconds (atomic, one round trip).

        Won when nobody holds it, its holder's lease has expired, or `owner` holds it already
        (which extends it by `ttl` from now: that is how a holder refreshes it). False while
        another owner holds it.
        """

    async def take_thread(
        self, channel: str, thread_ts: str, *, owner: str, ttl: float, initiator: str | None = None
    ) -> ThreadTake:
        """`acquire_thread`, and the thread's stop mark (`thread_stop`) read in the same atomic
        step, whether the lease was won or not: a turn taking its lease learns which stop it
        starts from without another round trip. A won lease with `initiator` also records who
        started the turn (`thread_initiator`, kept as long as the thread's run pointer)."""

    async def release_thread(
        self, channel: str, thread_ts: str, *, owner: str, run_id: str | None = None
    ) -> None:
        """Free the thread's lease if `owner` still holds it; another owner's lease is kept.
        With `run_id`, the thread points at that run from now on (as `set_thread_run`), in the
        same round trip: a turn moves its thread on as it lets go of it."""

    async def stop_thread(self, channel: str, thread_ts: str, stop: ThreadStop) -> None:
        """Mark the thread stopped (the last stop wins); kept `STOP_TTL` seconds."""

    async def thread_stop(self, channel: str, thread_ts: str) -> ThreadStop | None:
        """The thread's last stop mark, if one is kept."""

    async def thread_initiator(self, channel: str, thread_ts: str) -> str | None:
        """Who started the thread's latest turn, as the last `take_thread(initiator=...)` that
        won the lease recorded it; None when none is kept."""

    async def set_run_stream(self, run_id: str, ts: str) -> None:
        """Remember the message a run streams into, so a retry of the run can find it."""

    async def run_stream(self, run_id: str) -> str | None:
        """The message `set_run_stream` remembered for the run, if any."""


@runtime_checkable
class AuditLog(Protocol):
    """An append-only record of answers, refusals and expiries."""

    async def audit(self, entry: AuditEntry) -> None: ...

    async def recent_audit(self, *, limit: int = 100) -> list[AuditEntry]:
        """Newest first."""


@runtime_checkable
class HomeViewers(Protocol):
    """Who opened the app's Home tab lately, so that a new request refreshes only their views
    (a Slack call for someone who never looks there is wasted)."""

    async def mark_home_opened(self, user: str, *, ttl: float) -> None:
        """`user` opened Home: they count as a viewer for `ttl` seconds from now."""

    async def home_viewers(self, *, limit: int = 500) -> list[str]:
        """Users whose mark has not run out, the most recently marked first."""


@runtime_checkable
class Inbox(Protocol):
    """Work the app accepted (Slack events, clicks, modal submissions), written before Slack
    gets its 200 and worked from here at least once, by any process.

    An item is leased to one consumer at a time; a consumer that dies (or stops renewing its
    lease: a process's heartbeat, `open_heartbeat`, or `extend`) loses it to the next `take`
    once the lease runs out, so work must be safe to do twice. Items come out in enqueue order.
    """

    async def enqueue(
        self,
        kind: str,
        body: dict[str, Any],
        *,
        dedupe: str | None = None,
        about: str | None = None,
    ) -> str | None:
        """Durably add an item (one round trip); its id, or None when `dedupe` (e.g. Slack's
        event_id) was already enqueued within `DELIVERY_TTL`.

        The dedupe mark and the item are written atomically (one Lua script on Redis, one
        transaction on SQLite): a failed write leaves no mark, so Slack's redelivery of work we
        could not record is not dropped.

        `about` names the interaction a click or a modal answer is about: the item comes with it
        (`WorkItem.interaction`), read in a round trip the item makes anyway, so the worker
        checks the click without reading it again.
        """

    async def take(
        self, consumer: str, *, count: int = 16, lease: float = 5.0, block: float = 0.0
    ) -> list[WorkItem]:
        """Up to `count` items leased to `consumer` for `lease` seconds: first items whose
        previous consumer's lease ran out, then new ones. `block` > 0 waits up to that many
        seconds for new items when none is ready."""

    async def extend(self, consumer: str, item_ids: Sequence[str], *, lease: float) -> list[str]:
        """Heartbeat: renew the lease of the items `consumer` still holds; returns those ids, so
        a consumer learns it lost an item to another one."""

    async def done(self, item_id: str) -> None:
        """The item's work is finished: remove it (one round trip). Idempotent."""

    async def inbox_size(self) -> int:
        """Items not done yet (waiting or leased)."""

    def open_heartbeat(self) -> Heartbeat:
        """A connection of its own to the store, for a thread that keeps this process's items
        and thread leases alive (`Heartbeat.beat`) however busy its event loop is."""


@runtime_checkable
class GrantStore(Protocol):
    """Standing grants: later calls of a tool in a thread or channel approved by whoever gave
    the grant, until it expires or is revoked."""

    async def add_grant(self, grant: Grant, *, audit: AuditEntry) -> bool:
        """Store the grant and write `audit`, in one atomic step; False (nothing written) when
        a grant with its id exists already (its id derives from the approval it came with, so a
        retried click adds it once, even after a revoke) or it has expired at `created_at`."""

    async def get_grant(self, grant_id: str) -> Grant | None:
        """The grant as stored (revoked or expired too, within `GRANT_GRACE`); None if unknown."""

    async def covering_grants(
        self, tool: str, *, channel: str, thread_ts: str | None, now: float
    ) -> list[Grant]:
        """The grants active at `now` that cover a call of `tool` there: the thread's grants
        for it and the channel's, the longest-lasting first."""

    async def active_grants(
        self, *, now: float, granted_by: str | None = None, limit: int = 100
    ) -> list[Grant]:
        """Grants active at `now` (those `granted_by` gave, when set), expiring soonest first."""

    async def revoke_grant(
        self, grant_id: str, *, by: str, now: float, audit: AuditEntry
    ) -> GrantClaim:
        """Atomically revoke a grant active at `now`, writing `audit` when that wins (one round
        trip). Lost when it is unknown, revoked already or expired; the grant comes back as
        stored so the caller can say which."""

    async def answer_under_grant(
        self,
        interaction_id: str,
        *,
        grant_id: str,
        answer: Any,
        answered_by: str,
        now: float,
        audit: AuditEntry,
        stop: StopGuard | None = None,
    ) -> InteractionClaim:
        """The answer and its `audit` entry as `answer_and_claim` without a turn or votes, won
        only while the grant is active at `now` too, checked in the same atomic step: once
        `revoke_grant` returns, no answer under that grant is taken any more. A lost claim
        returns the interaction as stored. `stop` as for `answer_and_claim`."""


@runtime_checkable
class CallQueue(Protocol):
    """The store's own queue of calls, as this process sees it."""

    @property
    def calls_waiting(self) -> int:
        """Calls of this process waiting for their turn at the store right now: for a pooled
        connection (Redis) or for the database thread (SQLite). The inbox worker takes no new
        work while its own work keeps calls waiting, so the app's inbox writes, which Slack
        waits for, do not queue behind it."""


# What each part of the app uses of the store, where it uses several of the boundaries above:
# naming the combination after its user lets mypy prove the part touches nothing else. They are
# shapes of the app's own wiring, not interfaces a user implements (that is `Store`), so they
# stay out of `state.__all__`.


class AuditedInteractions(InteractionStore, AuditLog, Protocol):
    """Closing and nudging interactions, each change audited (the expiry sweep, the nudges)."""


class Backlog(InteractionStore, Inbox, Protocol):
    """What the metrics read at each scrape: the inbox's size and the pending interactions."""


class CardWork(InteractionStore, AuditLog, Inbox, Protocol):
    """Posting a run's cards and closing them: its interactions, their audit, and the inbox
    item that recovers a run whose cards were all answered."""


class GrantWork(GrantStore, AuditLog, Protocol):
    """Adding, using and revoking standing grants, audited."""


class HomeReads(RunStore, InteractionStore, AuditLog, HomeViewers, GrantStore, Protocol):
    """What the App Home lists: pending requests and their runs, someone's answers and grants,
    and who looks at Home."""


class InboxWork(Inbox, CallQueue, Protocol):
    """The inbox worker: taking items, finishing them, and not taking more while the store's
    calls queue."""


class Routing(InteractionStore, ConversationStore, Protocol):
    """Deciding where a work item goes: the interaction a click names, the thread's run."""


class StopWork(RunStore, InteractionStore, ConversationStore, AuditLog, Protocol):
    """Stopping a thread's turn: its run, the requests it waits on, who started it, the audit."""


class ThreadRuns(RunStore, ConversationStore, InteractionStore, AuditLog, Protocol):
    """Driving a run in a Slack thread: the run, the thread's pointer to it and its stop mark,
    and the questions its open calls ask (interactions, audited)."""


class ThreadWork(
    RunStore, InteractionStore, ConversationStore, AuditLog, GrantStore, Inbox, Protocol
):
    """A thread's turns end to end: its lease and runs, their cards and grants, the audit."""


@runtime_checkable
class Store(
    RunStore,
    InteractionStore,
    ConversationStore,
    AuditLog,
    HomeViewers,
    Inbox,
    GrantStore,
    CallQueue,
    Protocol,
):
    """Everything handback persists; `open_store(url)` returns one."""

    async def aclose(self) -> None:
        """Release connections; closing twice is fine."""


@runtime_checkable
class ClickStore(InteractionStore, GrantStore, AuditLog, Protocol):
    """What taking a click uses: its interaction, the grant a Home revoke names, the audit."""


@runtime_checkable
class ReplyStore(ConversationStore, InteractionStore, RunStore, Protocol):
    """What answering in a thread uses: the thread's run and that run's interactions."""


@runtime_checkable
class RecoveryStore(RunStore, InteractionStore, Inbox, Protocol):
    """What recovery uses: runs settled but never resumed, and the inbox their resume is queued
    in."""


@runtime_checkable
class AnswerStore(
    RunStore, InteractionStore, ConversationStore, AuditLog, Inbox, GrantStore, Protocol
):
    """What the Slack app's click path uses in all (everything but Home's viewers)."""
