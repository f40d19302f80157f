"""An approval's answer is read in one place (`read_approval`), and only `true` approves: the
stores' vote counting, the Slack policy and the runtime's gate all agree on what approves."""

from __future__ import annotations

from typing import Any

import pytest

from state import ApprovalAnswer, read_approval

# Kept out of `state.__all__` (only the Slack app's internals use it): pinned here directly.
from state._approval_answer import approves


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
