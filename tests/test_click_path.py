"""The click path's shape: every interaction kind and every work item kind reaches a branch of
its own (the `match` statements end in `assert_never`, so a kind without one fails here, not in
Slack), the decisions are pure functions, and no click-path piece takes the whole `Store`."""

from __future__ import annotations

import ast
import logging
from pathlib import Path
from typing import Any, get_args

import pytest

import blocks

# The click path's pieces are the Slack app's internals (its payload models, gate, decisions and
# kind tables): this file pins their shape, so it reads them where they are.
from blocks import _slack_models
from bot.slack import AnswerPolicy, _verify
from bot.slack._claim import outcome_of
from bot.slack._dispatch import WORK_KINDS, Dispatch, WorkKind, is_work_kind
from bot.slack._take import look_up
from bot.slack._worker import Work
from state import (
    ApprovalAnswer,
    InteractionKind,
    InteractionRecord,
    RunRecord,
    WorkItem,
    kind_of,
    read_approval,
)

# The stores' vote counting reads approvals with this; kept out of `state.__all__` (only the
# Slack app's internals use it), so it is pinned against `read_approval` here directly.
from state._approval_answer import approves

# The claim records the decisions read: coordination records, kept out of `state.__all__`.
from state._records import AnswerClaim, ThreadStop, Vote
from tests.blocks._slack import click, submit

ROOT = Path(__file__).resolve().parents[1]

CLICK_PATH = (
    "_claim",
    "_clicks",
    "_earlier",
    "_modals",
    "_recheck",
    "_recovery",
    "_refuse",
    "_replies",
    "_resume",
    "_take",
    "_votes",
)
"""The modules of `bot/slack/` an answer passes through, from the click to the resume."""

_PAYLOADS: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {
    "approval": ("approval", {"tool": "deploy", "arguments": {"env": "prod"}}, None),
    "confirm": ("confirm", {"action": "Restart the api"}, {"type": "boolean"}),
    "ask_user": ("ask_user", {"question": "Which database?"}, {"type": "string"}),
    "ask_user_multi": (
        "ask_user_multi",
        {"question": "Which regions?", "options": ["eu", "us"]},
        {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}},
    ),
    "elicitation": (
        "elicitation",
        {"server": "ops", "tool": "restart", "message": "Why?", "schema": {}},
        None,
    ),
    "custom": ("pick_a_colour", {"question": "Which colour?"}, {"type": "string"}),
}


def _record(of: InteractionKind, **fields: Any) -> InteractionRecord:
    stored_kind, payload, schema = _PAYLOADS[of]
    values: dict[str, Any] = {
        "interaction_id": f"int_{of}",
        "run_id": "run_1",
        "kind": stored_kind,
        "payload": payload,
        "response_schema": schema,
        "channel": "C0CHANNEL",
        "thread_ts": "1699999999.000001",
        "requester": "U0REQUEST",
        "expires_at": 2_000_000_000.0,
    }
    values.update(fields)
    return InteractionRecord(**values)


def test_every_interaction_kind_has_a_record_to_test_with() -> None:
    assert set(_PAYLOADS) == set(get_args(InteractionKind))


@pytest.mark.parametrize("kind", get_args(InteractionKind))
async def test_every_interaction_kind_is_rendered_answered_and_checked(
    kind: InteractionKind,
) -> None:
    record = _record(kind)
    assert kind_of(record) == kind
    card = blocks.render_card(record, approvers=("U0BOB",))
    assert card["blocks"] and card["text"]
    assert blocks.accepts_text_reply(record) is (kind in ("ask_user", "custom"))

    async def nobody(group: str) -> frozenset[str]:
        return frozenset()

    # An approval is refused to someone the policy does not name as its approver, an MCP
    # server's question to anyone but its requester; the rest to nobody (no `answerers`).
    refusal = await AnswerPolicy(approvers=("U0BOB",)).refusal(record, "U0CAROL", nobody)
    assert (refusal is not None) is (kind in ("approval", "elicitation"))


def test_a_tool_named_kind_is_custom() -> None:
    assert kind_of(_record("custom", kind="")) == "custom"
    assert kind_of(_record("custom", kind="Approval")) == "custom"


@pytest.mark.parametrize("kind", sorted(WORK_KINDS))
def test_every_work_kind_is_known(kind: WorkKind) -> None:
    assert is_work_kind(kind)


async def test_an_unknown_work_kind_is_dropped_with_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dispatch = Dispatch.__new__(Dispatch)  # an unknown kind reaches no collaborator
    item = WorkItem(
        item_id="1-0", kind="from_a_newer_process", body={}, attempts=1, enqueued_at=0.0
    )
    with caplog.at_level(logging.ERROR, logger="handback.slack"):
        await dispatch.work(item)
    assert "unknown kind 'from_a_newer_process'" in caplog.text
    assert not is_work_kind("from_a_newer_process")


# -------------------------------------------------------------- the pure decisions

RETRY = Work(id="item-1", attempt=2)


@pytest.mark.parametrize(
    ("record", "channel", "work", "expected"),
    [
        (None, "C0CHANNEL", None, "missing"),
        (_record("approval"), "C0OTHER", None, "elsewhere"),
        (_record("approval", expires_at=10.0), "C0CHANNEL", None, "expired"),
        (_record("approval", status="answered", answered_by="U0BOB"), "C0CHANNEL", None, "closed"),
        (_record("approval", status="answered", answered_by="U0BOB"), "C0CHANNEL", RETRY, "retry"),
        (_record("approval", status="cancelled"), None, RETRY, "closed"),
        (_record("approval"), None, None, "open"),
    ],
)
def test_looking_up_a_click_decides_from_the_record_alone(
    record: InteractionRecord | None, channel: str | None, work: Work | None, expected: str
) -> None:
    look = look_up(record, user="U0BOB", channel=channel, now=100.0, work=work)
    assert look.kind == expected
    assert bool(look.reason) is (expected not in ("retry", "open"))


@pytest.mark.parametrize(
    ("claim", "work", "held", "expected"),
    [
        (AnswerClaim(won=False, record=_record("approval")), None, False, "lost"),
        (
            AnswerClaim(
                won=False, record=_record("approval"), stopped=ThreadStop(user="U0A", at=1.0)
            ),
            RETRY,
            True,
            "stopped",
        ),
        (
            AnswerClaim(
                won=True,
                record=_record("approval", status="answered"),
                run=RunRecord(run_id="run_1", parent_id=None, agent_name="ops", status="paused"),
            ),
            RETRY,
            True,
            "resumed",
        ),
        (
            AnswerClaim(
                won=True, partial=True, record=_record("approval", votes=[Vote(user="U0BOB", at=1)])
            ),
            RETRY,
            True,
            "vote",
        ),
        (AnswerClaim(won=False, record=None), None, False, "lost"),
        (
            AnswerClaim(won=True, record=_record("approval", status="answered")),
            None,
            False,
            "answered",
        ),
        (
            AnswerClaim(
                won=False,
                record=_record("approval", status="answered", answered_by="U0BOB", answer=True),
            ),
            RETRY,
            False,
            "retry",
        ),
        (
            AnswerClaim(
                won=False,
                record=_record("approval", status="answered", answered_by="U0BOB", answer=True),
            ),
            None,
            False,
            "lost",
        ),
    ],
)
def test_what_a_claim_came_to_is_decided_from_the_claim_alone(
    claim: AnswerClaim, work: Work | None, held: bool, expected: str
) -> None:
    outcome = outcome_of(claim, user="U0BOB", answer=True, work=work, now=100.0, held=held)
    assert outcome.kind == expected
    assert bool(outcome.reason) is (expected == "lost")


# -------------------------------------------------------------- narrow stores


def _store_annotations(path: Path) -> list[tuple[str, str]]:
    """`(function, annotation)` of every parameter named `store` in the module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in node.args.args + node.args.kwonlyargs:
                if arg.arg == "store" and arg.annotation is not None:
                    found.append((node.name, ast.unparse(arg.annotation)))
    return found


@pytest.mark.parametrize("module", CLICK_PATH)
def test_click_path_modules_take_a_narrow_store(module: str) -> None:
    annotations = _store_annotations(ROOT / "bot" / "slack" / f"{module}.py")
    assert all(annotation != "Store" for _, annotation in annotations), annotations


def test_the_click_path_modules_take_a_store_at_all() -> None:
    # Guards the check above against a rename that would make it pass on nothing.
    assert sum(len(_store_annotations(ROOT / "bot/slack" / f"{m}.py")) for m in CLICK_PATH) >= 8


# -------------------------------------------------------------- one model per payload


def test_the_edge_checks_clicks_and_forms_with_the_models_the_worker_reads_them_with() -> None:
    assert _verify.BlockActions is _slack_models.BlockActions
    assert _verify.ViewSubmission is _slack_models.ViewSubmission


def _with_new_fields(value: Any, *, keyed: int = 0) -> Any:
    """`value` with a field Slack might add tomorrow in every object (not among the keys of a
    state's `values`, which are block ids and then action ids: `keyed` levels to skip)."""
    if isinstance(value, dict):
        grown = {
            k: _with_new_fields(v, keyed=2 if k == "values" else max(keyed - 1, 0))
            for k, v in value.items()
        }
        return grown if keyed else {**grown, "added_later": {"x": [1]}}
    if isinstance(value, list):
        return [_with_new_fields(v) for v in value]
    return value


def test_fields_slack_adds_pass_the_edge_and_change_nothing_read() -> None:
    record = _record("approval", message_ts="1700000000.000100")
    payload = click(blocks.render_card(record, approvers=("U0BOB",)), "hb:approve")
    grown = _with_new_fields(payload)
    assert _verify.check_payload(payload) is None
    assert _verify.check_payload(grown) is None
    assert blocks.parse_block_action(grown) == blocks.parse_block_action(payload)


def test_a_form_slack_adds_fields_to_passes_the_edge_and_reads_the_same() -> None:
    record = _record("ask_user")
    payload = submit(blocks.render_modal(record), {})
    grown = _with_new_fields(payload)
    assert _verify.check_payload(grown) is None
    assert blocks.parse_view_submission(grown) == blocks.parse_view_submission(payload)


# An approval's answer is read in one place (`read_approval`), and only `true` approves: the
# stores' vote counting, the Slack policy and the runtime's gate all agree on what approves.


@pytest.mark.parametrize(
    ("answer", "read"),
    [
        (True, ApprovalAnswer(approved=True)),
        (False, ApprovalAnswer(approved=False)),
        ({"approved": True}, ApprovalAnswer(approved=True)),
        (
            {"approved": False, "reason": "not now"},
            ApprovalAnswer(approved=False, reason="not now"),
        ),
        (
            {"approved": True, "arguments": {"version": "2.4"}, "grant": "thread"},
            ApprovalAnswer(approved=True, edits={"version": "2.4"}),
        ),
        # An edit on a denial is nobody's to run.
        ({"approved": False, "arguments": {"version": "2.4"}}, ApprovalAnswer(approved=False)),
        ({"approved": True, "reason": ""}, ApprovalAnswer(approved=True)),
    ],
)
def test_an_answer_reads_as_what_it_says(answer: Any, read: ApprovalAnswer) -> None:
    assert read_approval(answer) == read
    assert approves(answer) is read.approved


@pytest.mark.parametrize(
    "answer",
    [1, "yes", "true", {"approved": 1}, {"approved": "true"}, {}, None, [True], {"ok": True}],
)
def test_nothing_but_true_approves(answer: Any) -> None:
    assert read_approval(answer).approved is False
    assert read_approval(answer).edits is None
