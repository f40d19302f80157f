"""A modal's answer, in two steps: checked before its ack (`check_submission`), so a problem
shows inline and the form stays open; claimed by the worker afterwards (`on_modal_answer`, a
`view` work item), with every check made again first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import blocks
from blocks import InvalidAnswer, ModalSubmission
from state import CorruptRecordError, InteractionRecord, approval_of

# Used only by the Slack app's internals, kept out of `state.__all__` (not for users).
from state._approval_answer import approves

from .._errors import ApprovalPolicyError
from .._redact import redact_schema
from .._tool import ArgumentsError
from ._claim import Claims
from ._conversation import Conversations
from ._refusal import Refusal
from ._refuse import Refuser, user_and_channel
from ._take import Take
from ._worker import Work

__all__ = ["Modals", "SubmissionCheck"]


@dataclass(kw_only=True)
class SubmissionCheck:
    """The outcome of validating a modal before acking it: inline errors, or an answer to claim."""

    errors: dict[str, str] | None = None
    """By input block id, for `ack(response_action="errors", errors=...)`."""
    record: InteractionRecord | None = None
    answer: Any = None
    notice: str | None = None
    """A refusal that cannot be shown inline (the view has no input block)."""
    teams: tuple[str, ...] = ()
    """The workspaces the submission named, checked again when its answer is claimed."""


class Modals:
    """Checks and claims the answers people give in forms."""

    def __init__(
        self, *, conversations: Conversations, take: Take, claims: Claims, refuser: Refuser
    ) -> None:
        self.conversations = conversations
        self.take = take
        self.claims = claims
        self.refuser = refuser

    def not_recorded(self, body: dict[str, Any], message: str) -> SubmissionCheck:
        """The modal stays open with `message` shown inline, so the person can submit again."""
        return _inline(message, _first_input_block(body))

    async def check_submission(self, body: dict[str, Any]) -> SubmissionCheck:
        """Validate a `view_submission` before the ack, so errors can show inline."""
        user, _ = user_and_channel(body)
        first_input = _first_input_block(body)
        try:
            submission: ModalSubmission = blocks.parse_view_submission(body)
        except InvalidAnswer as error:
            return _inline(str(error), first_input)
        record: InteractionRecord | None = None
        try:
            record = await self.take.pending(
                submission.interaction_id,
                user,
                channel=None,
                denying=submission.callback_id == blocks.CALLBACK_DENY_MODAL,
            )
            await self.take.check_modal(record, user, submission.teams)
            answer = blocks.answer_from_submission(record, submission)
            if submission.callback_id == blocks.CALLBACK_EDIT_MODAL:
                problem = await self._edit_problem(record, answer)
                if problem is not None:
                    raise Refusal(problem, record=record)
        except Refusal as error:
            record = error.record or record
            told = await self.refuser.audit(
                user=user,
                reason=str(error),
                interaction_id=submission.interaction_id,
                run_id=record.run_id if record else None,
                record=record,
            )
            return _inline(told, first_input)
        except InvalidAnswer as error:
            if error.errors:
                return SubmissionCheck(errors=error.errors)
            return _inline(str(error), first_input)
        return SubmissionCheck(record=record, answer=answer, teams=submission.teams)

    async def on_modal_answer(self, item: dict[str, Any], *, work: Work | None = None) -> None:
        """Claim a modal's answer (a `view` work item, checked before its ack): every check
        is made again first, the submitter's and the request's, since either may have changed
        (or the item may not come from this app's own check)."""
        user = str(item["user"])
        answer = item["answer"]
        teams = tuple(str(team) for team in item.get("teams") or ())
        record: InteractionRecord | None = None
        try:
            record = await self.take.pending(
                str(item["interaction_id"]),
                user,
                channel=None,
                # Only an approval's Deny may come from its requester (`policy.refusal`).
                denying=not approves(answer),
                work=work,
            )
            await self.take.check_modal(record, user, teams)
        except Refusal as error:
            record = error.record or record
            await self.refuser.refuse(
                user=user,
                channel=record.channel if record else None,
                thread_ts=record.thread_ts if record else None,
                reason=str(error),
                interaction_id=str(item["interaction_id"]),
                run_id=record.run_id if record else None,
                record=record,
            )
            return
        await self.claims.accept(record, user=user, answer=answer, work=work)

    async def _edit_problem(self, record: InteractionRecord, answer: Any) -> str | None:
        """Why the runtime would not run an edit: with the edited arguments the tool's policy
        (the channel's rule, where it has one) asks for another rule than the request was made
        under (say, two approvers for prod where one approved staging). Told inline, before
        anything is claimed, so the approver denies and asks again instead, and the card never
        says "approved" for a call the gate then refuses. An argument shown hidden keeps the
        model's value, which is not here: the policy is asked with each value it could stand
        for (its default, the hidden mark) and any of them needing another rule is a problem,
        as is a policy that cannot be asked with any (fail closed). None when the edit may go
        on, or when this agent's tool is not the one that asked (the gate checks it again in
        any case)."""
        name = str(record.payload.get("tool", ""))
        # The tool as it is offered in the card's channel: a channel's own rule is the one
        # the request was made under, not the tool's.
        tool = self.conversations.agent.tools_in(record.channel or None).get(name)
        shown = record.payload.get("arguments")
        if (
            tool is None
            or not isinstance(shown, dict)
            or redact_schema(tool.parameters, tool.redact) != record.payload.get("arguments_schema")
        ):
            return None
        try:
            asked = approval_of(record)
        except CorruptRecordError:
            return None  # The claim refuses a rule that does not read back.
        locked = set(blocks.locked_arguments(record))
        edits = {k: v for k, v in answer["arguments"].items() if k not in locked}
        needed: list[Any] = []
        for hidden in _hidden_candidates(tool.parameters, shown, locked):
            try:
                arguments = tool.parse_arguments(json.dumps({**shown, **hidden, **edits}))
                needed.append(await tool.approval_for(arguments))
            except (ArgumentsError, ApprovalPolicyError):
                continue
        if needed and all(rule is None or rule == asked for rule in needed):
            return None
        if not needed:
            return (
                f"I cannot check the edited arguments of `{name}` against its approval rule "
                "here. Deny it and ask again instead."
            )
        return (
            f"With these arguments `{name}` needs a different approval than this request was "
            "made under. Deny it and ask again instead."
        )


def _inline(message: str, block_id: str | None) -> SubmissionCheck:
    if block_id is None:
        return SubmissionCheck(notice=message)
    return SubmissionCheck(errors={block_id: message[:150]})


def _hidden_candidates(
    schema: dict[str, Any], shown: dict[str, Any], locked: set[str]
) -> list[dict[str, Any]]:
    """Values the hidden (`locked`) arguments could stand for when a policy is asked about an
    edit: each at its default where the tool has one (a secret left empty, say), and each as
    shown (the hidden mark, which fits any text argument)."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    defaults: dict[str, Any] = {}
    for key in locked:
        spec = properties.get(key)
        if isinstance(spec, dict) and "default" in spec:
            defaults[key] = spec["default"]
        else:
            defaults[key] = shown.get(key)
    as_shown = {key: shown.get(key) for key in locked}
    return [defaults] if defaults == as_shown else [defaults, as_shown]


def _first_input_block(body: Any) -> str | None:
    """The block id inline errors can be shown under; None when the payload has no such block
    (or is not shaped like a view at all: this runs on payloads that failed to parse)."""
    view = body.get("view") if isinstance(body, dict) else None
    found = view.get("blocks") if isinstance(view, dict) else None
    for block in found if isinstance(found, list) else ():
        if not isinstance(block, dict) or block.get("type") != "input":
            continue
        block_id = block.get("block_id")
        if isinstance(block_id, str) and block_id:
            return block_id
    return None
