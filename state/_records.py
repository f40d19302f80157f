"""The values the stores keep: runs, pending interactions, and audit entries.

Plain dataclasses inside the process; the stores turn them into JSON (never pickle) and validate
what they read back with pydantic, because a store read is an untrusted edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

__all__ = [
    "AnswerClaim",
    "AuditAction",
    "AuditEntry",
    "InteractionClaim",
    "InteractionRecord",
    "InteractionStatus",
    "NestedRun",
    "Nudge",
    "NudgeKind",
    "PendingCall",
    "PendingInteraction",
    "RunClaim",
    "RunRecord",
    "RunStatus",
    "StopGuard",
    "ThreadLease",
    "ThreadStop",
    "ThreadTake",
    "TurnClaim",
    "Vote",
]

RunStatus = Literal["running", "paused", "success", "error", "cancelled"]
"""`running` is a journal: saved while tool handlers run, so a run whose process died can be
continued without running a finished call again. It is never claimable and never settled."""
InteractionStatus = Literal["pending", "answered", "expired", "superseded", "cancelled"]
AuditAction = Literal[
    "answered",
    "refused",
    "expired",
    "superseded",
    "cancelled",
    "resumed",
    "stopped",
    "granted",
    "revoked",
    "reminded",
    "escalated",
    "withdrawn",
]
NudgeKind = Literal["reminder", "escalation"]
"""What an unanswered approval is due for: its one reminder, then its one escalation."""


@dataclass(kw_only=True)
class PendingInteraction:
    """One `suspend()` (or approval) that is waiting for an answer.

    The one value of a pending question from `suspend()` to the card: the run keeps it
    (`RunRecord.interactions`), its `InteractionEvent` carries these fields, and the store's
    `InteractionRecord` is this plus where its card is and who answered."""

    interaction_id: str
    kind: str
    payload: dict[str, Any]
    response_schema: dict[str, Any] | None = None
    tool_call_id: str | None = None
    runnable_path: str = ""
    """Where in the agent tree it was asked (`outer.inner.tool`)."""
    runnable_name: str = ""
    runnable_type: str = "Tool"
    """The seed's `runnable_type`; every interaction the runtime makes is a tool's."""
    t0: int = 0
    """Unix ms at which the run suspended on it."""


@dataclass(kw_only=True)
class PendingCall:
    """A tool call of the last model step that has no result yet."""

    tool_call_id: str
    name: str
    arguments: str
    """The arguments exactly as the model sent them (a JSON string)."""


@dataclass(kw_only=True)
class NestedRun:
    """A pending call whose tool is an agent: the inner run that paused, and what it waits for.

    The inner run's interactions are the outer run's too (people answer them there); this says
    which of them the call owns and which run to resume with their answers."""

    run_id: str
    interaction_ids: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class RunRecord:
    """Everything needed to resume or continue a run with a single store read."""

    run_id: str
    parent_id: str | None
    agent_name: str
    status: RunStatus
    reason: str | None = None
    """`input_required` for a paused run; `cancelled` (an answer was `Cancel`) or `interrupted`
    (the task running it was cancelled) for a cancelled one; else None."""
    message: str | None = None
    """The status message of the run's `OutputEvent` (the cancel reason, the error), kept so
    that the event can be rebuilt from the record."""
    input: Any = None
    output: Any = None
    error: str | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """Chat Completions messages: system, user, assistant (with tool_calls) and tool results.
    In layout 2 the store keeps them in the conversation's transcript log, not in the record."""
    pending_calls: list[PendingCall] = field(default_factory=list)
    interactions: list[PendingInteraction] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=dict)
    """Accepted answers by interaction id, accumulated along the chain of runs."""
    usage: dict[str, int] = field(default_factory=dict)
    t0: int = 0
    t1: int | None = None
    resumed_by: str | None = None
    """The run id of the child that claimed this paused run; set once, atomically."""
    root_id: str | None = None
    """The first run of the conversation (a run with no parent is its own root; children
    inherit it). None in records written before interaction ids were scoped to it."""
    id_scheme: int = 1
    """How this run's handlers derive interaction ids: 2 hashes `root_id` in, 1 (records written
    before the field existed) does not, so runs paused before the upgrade still resume."""
    started: list[str] = field(default_factory=list)
    """Journal of a `running` run: the tool call ids of `pending_calls` whose handler started."""
    results: dict[str, str] = field(default_factory=dict)
    """Journal of a `running` run: results of `pending_calls` by tool call id, saved as each
    call returned, so a continued run never runs them again."""
    layout: int = 1
    """How the store keeps `transcript`. 1 (every record written before layout 2 existed, and
    the fallback below): the whole transcript inside the record. 2: the messages live once in
    the conversation's append-only transcript log `transcript_id`; the record holds where its
    transcript ends there, and a save appends only the messages after `base`. A layout-2 save
    that finds other messages where its own should be (two runs continued from one parent) is
    stored as layout 1 instead, so no transcript is ever changed under a run that uses it."""
    transcript_id: str | None = None
    """Layout 2: the transcript log the run's messages are appended to (the conversation's
    root, or the run's own id when its parent kept its transcript inline)."""
    base: int = 0
    """Layout 2: how many messages of `transcript` the log held before this run (its parent's
    transcript); the run's own messages are `transcript[base:]`."""
    transcript_read: bool = True
    """False on the run `claim_run` returns for layout 2: its transcript was not read (that is
    `load_run`'s job), so it must not be saved. Never stored."""
    nested: dict[str, NestedRun] = field(default_factory=dict)
    """By tool call id of `pending_calls`: the inner run a call to an agent paused on."""
    input_required: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By tool call id of `pending_calls`: the input-required result (its JSON) an MCP server
    answered the call with, which the retry is sent from (`bot.mcp`), so a resumed call never
    asks the server for the first round again."""
    requesters: list[str] = field(default_factory=list)
    """Who shaped this turn (the chain of runs since the last one that ended): whoever sent the
    messages that started or continued it and whoever gave the answers it consumed. Carried
    from parent to child, because `answers` are pruned at each pause; a run that continues after
    an ended one starts afresh. Approvals treat all of them as requesters."""
    thread: tuple[str, str] | None = None
    """The conversation's place, (channel, thread_ts), whose stop mark ends this run's turn;
    carried to the children that resume the turn. None for runs outside a thread and records
    written before the store checked stops: nothing is checked for those."""
    channel: str | None = None
    """The Slack channel the conversation is in, set by its first run and carried to every
    child: a resume, a retry in another process and a recovery offer (and run) that channel's
    tools and rules, whatever channel the event that resumes it names. None for runs outside
    a channel and records written before the field existed (those take the caller's)."""
    stop_seen: str | None = None
    """The thread's stop mark (as stored, `stop_mark`) when this run's turn began, None for none.
    While the thread keeps another mark, someone stopped the turn since: the store refuses to
    answer the run's requests or to claim it for a resume (`claim_run(thread=...)`)."""


@dataclass(kw_only=True)
class RunClaim:
    """The outcome of claiming a paused run; losing is a normal result, not an exception."""

    won: bool
    run: RunRecord | None
    """The run as stored (after the claim when won); None when no such run exists. A layout-2
    run comes without its transcript (`transcript_read` False; `transcript_id`, `root_id` when it
    is the log, and `input`/`output` when kept as its messages' text, may be unset): a claim
    decides who resumes, and the resume has read the run with `load_run` already."""
    stopped: ThreadStop | None = None
    """Lost because the run's turn was stopped (`RunRecord.stop_seen`): the stop that did it."""


@dataclass(kw_only=True, frozen=True)
class Vote:
    """One approval of an interaction that needs several (`Approval.count` > 1)."""

    user: str
    at: float
    """Unix seconds, by the clock of the process that took the click."""


@dataclass(kw_only=True)
class InteractionRecord(PendingInteraction):
    """A pending interaction as people see it: the interaction itself (every field of
    `PendingInteraction`), plus the run that asks, where its card is and who may answer.

    Records written before it carried the whole interaction lack `runnable_path`,
    `runnable_name`, `runnable_type` and `t0`; they read back with the defaults."""

    run_id: str
    channel: str = ""
    thread_ts: str | None = None
    message_ts: str | None = None
    requester: str | None = None
    """The person whose message started the run (approvals may forbid self-approval)."""
    requesters: list[str] = field(default_factory=list)
    """Everyone who shaped the turn that asks (`RunRecord.requesters`): none of them may approve
    it alone. Empty in records written before the field existed."""
    status: InteractionStatus = "pending"
    answer: Any = None
    answered_by: str | None = None
    answered_at: float | None = None
    created_at: float = 0.0
    expires_at: float = 0.0
    """Unix seconds after which a pending interaction counts as expired."""
    votes: list[Vote] = field(default_factory=list)
    """Approvals counted so far, in the order they came, by distinct people: an interaction
    that needs several (`answer_and_claim(needed=...)`) stays pending until the last. Kept
    after it closes, so the card can name every approver."""
    reminded_at: float | None = None
    """When its approvers were reminded (`Approval.remind_after`); set once, by the store's
    `mark_nudged`, never by whoever adds the record."""
    escalated_at: float | None = None
    """When its rule's `escalate_to` was added to who may approve it; set once, like
    `reminded_at`, and only after it."""

    @classmethod
    def placed(
        cls,
        interaction: PendingInteraction,
        *,
        run_id: str,
        channel: str,
        thread_ts: str | None,
        requester: str | None,
        requesters: Sequence[str],
        created_at: float,
        expires_at: float,
    ) -> InteractionRecord:
        """The record of `interaction`, asked by `run_id`, with its card to be posted in
        `channel`'s thread: the interaction's fields as they are, whichever fields it has."""
        return cls(
            **{f.name: getattr(interaction, f.name) for f in fields(PendingInteraction)},
            run_id=run_id,
            channel=channel,
            thread_ts=thread_ts,
            requester=requester,
            requesters=list(requesters),
            created_at=created_at,
            expires_at=expires_at,
        )


@dataclass(kw_only=True)
class InteractionClaim:
    """The outcome of answering an interaction; only the first valid answer wins."""

    won: bool
    record: InteractionRecord | None
    """The record as stored after the attempt; None when no such interaction exists."""
    stopped: ThreadStop | None = None
    """Lost because the turn that asked was stopped since (`RunRecord.stop_seen`): that stop."""


@dataclass(kw_only=True)
class Nudge:
    """An unanswered approval whose reminder or escalation is due (`due_nudges`)."""

    kind: NudgeKind
    due_at: float
    """Unix seconds it was due at: `created_at + remind_after` for the reminder, and the
    escalation `escalation_delay` seconds after that."""
    record: InteractionRecord


@dataclass(kw_only=True)
class AuditEntry:
    """Who did what to which interaction, and when."""

    at: float
    action: AuditAction
    interaction_id: str | None = None
    run_id: str | None = None
    user: str | None = None
    detail: str = ""


@dataclass(kw_only=True, frozen=True)
class ThreadStop:
    """Someone pressed stop on the turn running in a thread (Slack's `agent_session_stopped`)."""

    user: str
    at: float
    """Unix seconds, by the clock of the process that received the stop."""
    event_id: str = ""
    """Slack's id of the event: two stops are two marks even within one clock tick."""


@dataclass(kw_only=True, frozen=True)
class StopGuard:
    """A claim checked against a thread's stop in the same atomic step: refused when run
    `run_id` belongs to a thread (`RunRecord.thread`) that keeps a stop mark other than the
    one its turn began under (`RunRecord.stop_seen`), i.e. someone stopped that turn since."""

    run_id: str
    channel: str
    thread_ts: str


@dataclass(kw_only=True, frozen=True)
class ThreadLease:
    """A thread's lease held by `owner`."""

    channel: str
    thread_ts: str
    owner: str
    run_id: str | None = None
    """Where the thread points from then on (its last run), set with the release; None leaves
    the thread's run as it is."""


@dataclass(kw_only=True, frozen=True)
class TurnClaim:
    """What `answer_and_claim` may claim with the answer: the run, resumed by `child_id` in the
    thread `lease` names (taken for `lease_ttl` seconds), when this answer is the last it waits
    for."""

    run_id: str
    child_id: str
    lease: ThreadLease
    lease_ttl: float


@dataclass(kw_only=True)
class AnswerClaim:
    """The outcome of `answer_and_claim`: the answer's claim, and the run's when it came too."""

    won: bool
    record: InteractionRecord | None
    """The interaction as stored after the attempt; None when no such interaction exists."""
    partial: bool = False
    """Won as one vote of several (`needed` > 1) that was not the last: the interaction is
    still pending, waiting for more."""
    run: RunRecord | None = None
    """The run, claimed for the `TurnClaim`'s child with the thread's lease taken, when the
    answer won, was the only interaction of its run, the run was paused and unclaimed and the
    lease free (or its owner's). None otherwise: the caller goes the long way (reads the run's
    interactions, takes the lease, lets the runtime claim the run)."""
    stop: ThreadStop | None = None
    """With `run`: the thread's stop mark, read in the same step as the lease was taken, so the
    resumed turn knows which stop it starts from (`AgentTurn.stop_before`) without another round
    trip. None when the thread has none kept, and always without `run`."""
    stopped: ThreadStop | None = None
    """Lost because the turn that asked was stopped since (`RunRecord.stop_seen`): that stop.
    Nothing was written."""


@dataclass(kw_only=True, frozen=True)
class ThreadTake:
    """The outcome of `take_thread`: whether the lease is held, and the thread's stop mark read
    with it (whoever holds the lease), so a turn learns which stop it starts from without
    another round trip."""

    held: bool
    stop: ThreadStop | None = None
    """The thread's last stop mark, if one is kept."""
