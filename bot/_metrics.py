"""What an operator scrapes: Prometheus counters and histograms for the bot, and `/metrics`.

One registry for the process (`REGISTRY`), so every module records into the same place and a
scrape sees it all. Labels take values from small fixed sets (kinds, outcomes, statuses, Slack's
method names and error codes): never ids, user names, text or anything secret.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import Backlog

__all__ = [
    "ACK_SECONDS",
    "ANSWERS",
    "INBOX_ITEMS",
    "INBOX_WAIT_SECONDS",
    "INTERACTIONS_PENDING",
    "RECORDED",
    "RECORD_SECONDS",
    "REGISTRY",
    "RUNS_FINISHED",
    "RUNS_STARTED",
    "SLACK_API_ERRORS",
    "SOCKET_ACK_SECONDS",
    "SOCKET_TYPES",
    "STORE_ERRORS",
    "WORK_ITEMS",
    "WORK_LATENCY_SECONDS",
    "WORK_TAKEN",
    "WORK_TAKEN_OVER",
    "answer_refused",
    "http_middleware",
    "metrics_handler",
    "work_finished",
    "work_taken",
]

log = logging.getLogger("handback.metrics")

REGISTRY: Final = CollectorRegistry(auto_describe=True)
"""Everything `/metrics` serves: handback's metrics and the process's (CPU, memory, GC)."""
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    REGISTRY.register(_collector)

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
"""Seconds; 3 is Slack's deadline for an ack, so it is a bucket edge."""
_WORK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

RECORDED: Final = Counter(
    "handback_slack_requests",
    "Slack requests taken by the web side, by kind (event, action, view) and outcome "
    "(recorded in the inbox, repeated delivery, not_recorded because the store failed).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
ACK_SECONDS: Final = Histogram(
    "handback_http_request_duration_seconds",
    "Time to answer an HTTP request, by route and status; for /slack/events this is the ack "
    "latency Slack sees (3 s is its limit).",
    ["route", "status"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
SOCKET_ACK_SECONDS: Final = Histogram(
    "handback_socket_mode_ack_seconds",
    "Time from a Socket Mode envelope's arrival to its ack, by envelope type (events_api, "
    "interactive, slash_commands): the ack latency Slack sees in Socket Mode.",
    ["type"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
SOCKET_TYPES: Final = frozenset({"events_api", "interactive", "slash_commands"})
"""Envelope types labelled as themselves; any other is `other`, so a peer cannot add series."""
RECORD_SECONDS: Final = Histogram(
    "handback_record_seconds",
    "Time to write a Slack request to the inbox before acking it, by kind; the part of the ack "
    "latency that is ours, measured in HTTP and Socket Mode alike.",
    ["kind"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
INBOX_ITEMS: Final = Gauge(
    "handback_inbox_items",
    "Work items in the store's inbox not done yet (waiting or leased), read at scrape time.",
    registry=REGISTRY,
)
INTERACTIONS_PENDING: Final = Gauge(
    "handback_interactions_pending",
    "Interactions (cards) waiting for an answer, read at scrape time.",
    registry=REGISTRY,
)
INBOX_WAIT_SECONDS: Final = Histogram(
    "handback_inbox_wait_seconds",
    "Inbox lag: from an item being recorded to a worker taking it, by kind.",
    ["kind"],
    buckets=_WORK_BUCKETS,
    registry=REGISTRY,
)
WORK_ITEMS: Final = Counter(
    "handback_work_items",
    "Inbox items worked, by kind and outcome: done, failed (a bug; retried), store_error "
    "(left for a retry), dropped (too many attempts), retried (taken again after a lease ran "
    "out or a failure).",
    ["kind", "outcome"],
    registry=REGISTRY,
)
WORK_TAKEN: Final = Counter(
    "handback_work_taken",
    "Inbox items a worker got, by kind and how: take (its take from the store).",
    ["kind", "by"],
    registry=REGISTRY,
)
WORK_LATENCY_SECONDS: Final = Histogram(
    "handback_work_latency_seconds",
    "From an item being recorded to its work being done, by kind; for an action this is click "
    "to resumed run.",
    ["kind"],
    buckets=_WORK_BUCKETS,
    registry=REGISTRY,
)
WORK_TAKEN_OVER: Final = Counter(
    "handback_work_taken_over",
    "Inbox items taken from this process while it still ran them, by whom: another (a process's "
    "take, seen by this one's heartbeat) or self (its own take got an item it still ran). Its "
    "heartbeat keeps them its own however busy it is, so anything but 0 means it stopped "
    "beating (a loop stalled past the watchdog, or the store unreachable past the liveness TTL).",
    ["by"],
    registry=REGISTRY,
)

RUNS_STARTED: Final = Counter(
    "handback_runs_started",
    "Agent runs started, by how: new (a first message), continue (a later message in the "
    "conversation), resume (answers to a paused run), retry (an interrupted run continued from "
    "its journal).",
    ["how"],
    registry=REGISTRY,
)
RUNS_FINISHED: Final = Counter(
    "handback_runs_finished",
    "Agent runs that paused or ended, by status (success, error, cancelled, paused) and reason "
    "(input_required, cancelled, interrupted, exception, max_iterations, or none).",
    ["status", "reason"],
    registry=REGISTRY,
)
ANSWERS: Final = Counter(
    "handback_answers",
    "Clicks, modal submissions and thread replies that answer a request, by outcome: accepted, "
    "or why they were refused (duplicate, expired, closed, self_approval, not_allowed, "
    "policy_unavailable, elsewhere, invalid, other).",
    ["outcome"],
    registry=REGISTRY,
)
SLACK_API_ERRORS: Final = Counter(
    "handback_slack_api_errors",
    "Slack Web API calls that failed, by method and Slack's error code (unreachable when "
    "Slack did not answer).",
    ["method", "error"],
    registry=REGISTRY,
)
STORE_ERRORS: Final = Counter(
    "handback_store_errors",
    "Store calls that failed, by where: record (the ack path), work, take, done, lease, scrape.",
    ["where"],
    registry=REGISTRY,
)

_REFUSALS = (
    ("already answered", "duplicate"),
    ("expired", "expired"),
    ("someone else has to approve", "self_approval"),
    ("not on the list", "not_allowed"),
    ("could not check", "policy_unavailable"),
    ("in this channel", "elsewhere"),
    ("closed", "closed"),
    ("cancelled", "closed"),
    ("control", "invalid"),
    ("not one of", "invalid"),
)
"""Refusal text -> outcome label. The refusals are sentences for people; this maps them to a
fixed set, and anything unforeseen counts as `other` rather than as a new label."""


def answer_refused(reason: str) -> None:
    """Count a refused answer under the outcome its reason names."""
    lowered = reason.lower()
    outcome = next((label for text, label in _REFUSALS if text in lowered), "other")
    ANSWERS.labels(outcome=outcome).inc()


def work_taken(kind: str, *, attempts: int, enqueued_at: float) -> None:
    """An inbox item was taken: its lag on the first take, a retry on any later one."""
    if attempts > 1:
        WORK_ITEMS.labels(kind=kind, outcome="retried").inc()
    else:
        INBOX_WAIT_SECONDS.labels(kind=kind).observe(max(0.0, time.time() - enqueued_at))


def work_finished(kind: str, outcome: str, *, enqueued_at: float) -> None:
    """An inbox item's work ended with `outcome`; done items also count their latency."""
    WORK_ITEMS.labels(kind=kind, outcome=outcome).inc()
    if outcome == "done":
        WORK_LATENCY_SECONDS.labels(kind=kind).observe(max(0.0, time.time() - enqueued_at))
    elif outcome == "store_error":
        STORE_ERRORS.labels(where="work").inc()


_ROUTES = frozenset({"/slack/events", "/healthz", "/metrics"})


@web.middleware
async def http_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Time every request; unknown paths share one label, so a scanner cannot add series."""
    started = time.perf_counter()
    route = request.path if request.path in _ROUTES else "other"
    status = 500
    try:
        response = await handler(request)
        status = response.status
        return response
    except web.HTTPException as error:
        status = error.status
        raise
    finally:
        ACK_SECONDS.labels(route=route, status=str(status)).observe(time.perf_counter() - started)


_SCRAPE_READ_WAIT = 1.0
"""Seconds a scrape waits for the store; a slow store must not make the scrape time out."""


def metrics_handler(store: Backlog) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The `/metrics` handler; the inbox size and the pending interactions are read from `store`
    at each scrape (a store that does not answer in time leaves the last values and counts a
    store error)."""

    async def handle(request: web.Request) -> web.Response:
        for gauge, read in (
            (INBOX_ITEMS, store.inbox_size),
            (INTERACTIONS_PENDING, store.pending_count),
        ):
            try:
                gauge.set(await asyncio.wait_for(read(), _SCRAPE_READ_WAIT))
            except Exception as error:
                # Any failure of the read (a StoreError, a timeout): the scrape still answers.
                STORE_ERRORS.labels(where="scrape").inc()
                log.warning("metrics: could not read the store: %s", str(error) or "timeout")
        body = generate_latest(REGISTRY)
        response = web.Response(body=body)
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    return handle
