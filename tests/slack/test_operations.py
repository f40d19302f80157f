"""What an operator sees of a real `handback run`: `/metrics` over HTTP and JSON log lines."""

from __future__ import annotations

import json

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from blocks import ACTION_APPROVE

# How a refusal's words map to an outcome label is a unit of the metrics module: bumped and read in
# this process's registry (the one `/metrics` serves), with no process to scrape.
from bot._metrics import REGISTRY, answer_refused

from .._local_slack import TestSlack
from .conftest import ALICE, BOB, CHANNEL
from .processes import Fleet, free_port

pytestmark = pytest.mark.slow

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(port: int) -> Samples:
    """Every sample `/metrics` serves, by name and sorted labels."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=")
        text = await response.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_move_and_logs_are_json_without_secrets(sqlite_store_url: str) -> None:
    metrics_port = free_port()
    async with (
        TestSlack() as slack,
        Fleet(
            slack,
            sqlite_store_url,
            ref="tests.slack.agents:approval_agent",
            env={
                "HANDBACK_LOG_FORMAT": "json",
                "HANDBACK_LOG_LEVEL": "DEBUG",
                "HANDBACK_APPROVERS": BOB,
                "HANDBACK_METRICS_PORT": str(metrics_port),
            },
        ) as fleet,
    ):
        [bot] = await fleet.start("all")
        before = await scrape(bot.port)
        assert value(before, "handback_answers_total", outcome="accepted") == 0

        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await slack.wait_for(lambda: next(iter(slack.bot_messages()), None))
        assert card is not None and card.blocks
        await bot.wait_idle()
        assert value(await scrape(bot.port), "handback_interactions_pending") == 1
        await slack.click(ALICE, card.ts, ACTION_APPROVE)  # her own request: refused
        await slack.wait_for(lambda: slack.ephemerals_for(ALICE))
        await slack.click(BOB, card.ts, ACTION_APPROVE)
        await slack.wait_for(
            lambda: [m for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
        )
        await bot.wait_idle()

        after = await scrape(bot.port)
        assert value(after, "handback_slack_requests_total", kind="event", outcome="recorded") == 1
        assert value(after, "handback_slack_requests_total", kind="action", outcome="recorded") == 2
        assert value(after, "handback_answers_total", outcome="accepted") == 1
        assert value(after, "handback_answers_total", outcome="self_approval") == 1
        assert value(after, "handback_runs_started_total", how="new") == 1
        assert value(after, "handback_runs_started_total", how="resume") == 1
        paused = value(
            after, "handback_runs_finished_total", status="paused", reason="input_required"
        )
        assert paused == 1
        assert value(after, "handback_runs_finished_total", status="success", reason="none") == 1
        assert value(after, "handback_work_items_total", kind="action", outcome="done") == 2
        assert value(after, "handback_work_items_total", kind="event", outcome="done") == 1
        assert value(after, "handback_work_taken_total", kind="event", by="take") == 1
        assert value(after, "handback_work_taken_total", kind="action", by="take") == 2
        acks = value(
            after,
            "handback_http_request_duration_seconds_count",
            route="/slack/events",
            status="200",
        )
        assert acks >= 3  # the mention, two clicks (and the plain message event, ignored)
        assert value(after, "handback_work_latency_seconds_count", kind="action") == 2
        assert value(after, "handback_record_seconds_count", kind="action") == 2
        assert value(after, "handback_inbox_items") == 0
        assert value(after, "handback_interactions_pending") == 0
        assert ("process_resident_memory_bytes", ()) in after
        on_metrics_port = await scrape(metrics_port)  # the same registry, on a port of its own
        assert value(on_metrics_port, "handback_answers_total", outcome="accepted") == 1

        await fleet.bots[0].stop()
        log = "".join(bot.lines)
        for secret in (slack.bot_token, slack.signing_secret):
            assert secret not in log
        lines = [json.loads(line) for line in bot.lines]
        assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
        assert any("listening on 127.0.0.1:" in line["message"] for line in lines)
        assert any(line.get("run_id") for line in lines)
        assert any(line.get("thread") == asked.ts for line in lines)


async def test_a_worker_serves_metrics_on_its_health_port(redis_store_url: str) -> None:
    async with (
        TestSlack() as slack,
        Fleet(slack, redis_store_url, ref="tests.slack.agents:approval_agent") as fleet,
    ):
        web, worker = await fleet.start("web", "worker")
        await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await slack.wait_for(lambda: next(iter(slack.bot_messages()), None))
        assert card is not None
        await worker.wait_idle()
        on_web, on_worker = await scrape(web.port), await scrape(worker.port)
        assert value(on_web, "handback_slack_requests_total", kind="event", outcome="recorded") == 1
        assert value(on_web, "handback_work_items_total", kind="event", outcome="done") == 0
        assert value(on_worker, "handback_work_items_total", kind="event", outcome="done") == 1
        assert value(on_worker, "handback_inbox_items") == 0
        assert value(on_worker, "handback_inbox_wait_seconds_count", kind="event") == 1
        # A web-only process takes nothing: its worker does not run.
        assert value(on_web, "handback_work_taken_total", kind="event", by="take") == 0
        assert value(on_worker, "handback_work_taken_total", kind="event", by="take") == 1
        # A worker gets an item by its own take and no other way (the only `by` documented).
        taken_by = {
            dict(labels)["by"]
            for samples in (on_web, on_worker)
            for name, labels in samples
            if name == "handback_work_taken_total"
        }
        assert taken_by == {"take"}


@pytest.mark.parametrize(
    ("reason", "outcome"),
    [
        ("This was already answered by <@U0BOB>.", "duplicate"),
        ("This request expired, so it can no longer be answered.", "expired"),
        ("You asked for this, so someone else has to approve it.", "self_approval"),
        (
            "You answered a question or sent a message in the conversation that led to this "
            "request, so someone else has to approve it.",
            "self_approval",
        ),
        ("You are not on the list of people who may approve `deploy`.", "not_allowed"),
        (
            "I could not check whether you may answer this: Slack did not answer.",
            "policy_unavailable",
        ),
        ("This control does not belong to a request in this channel.", "elsewhere"),
        ("This request was closed because the conversation moved on.", "closed"),
        ("That option is not one of this request's options.", "invalid"),
        ("Something nobody foresaw.", "other"),
    ],
)
def test_refusals_count_under_a_fixed_set_of_outcomes(reason: str, outcome: str) -> None:
    def count() -> float:
        return REGISTRY.get_sample_value("handback_answers_total", {"outcome": outcome}) or 0.0

    before = count()
    answer_refused(reason)
    assert count() == before + 1
