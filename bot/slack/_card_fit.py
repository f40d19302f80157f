"""The cards handback will send, checked against what Slack refuses before a person meets them:
every card kind rendered from fixture requests at its extremes, checked offline against the
limit table LocalSlack enforces (`bot.playground._limits`: slack_sdk's Block Kit models plus the
documented figures they leave out) and, given a token, through Slack's `blocks.validate`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, assert_never

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

import blocks
from state import RULE_KEY, Approval, InteractionRecord

from .._step import APPROVAL_SCHEMA
from ..playground._limits import Refusal, check_message, check_view, limit

__all__ = ["CARD_KINDS", "Sent", "SlackVerdict", "card_kinds", "offline_problems", "slack_problems"]

Surface = Literal["message", "update", "modal", "home"]


@dataclass(kw_only=True, frozen=True)
class Sent:
    """One payload the bot sends for a card kind, and where it goes."""

    surface: Surface
    """`message`: chat.postMessage / postEphemeral; `update`: chat.update; `modal`:
    views.open / update; `home`: views.publish."""
    payload: Mapping[str, Any]
    """The message (`text`, `blocks`) or the view."""


CARD_KINDS: Final = (
    "approval",
    "two-person",
    "question",
    "select of 150",
    "multi-select",
    "free text",
    "edit form",
    "App Home with many requests",
    "long arguments",
)
"""The kinds `handback doctor` checks, one line each when it fails."""

_LONG: Final = "Please decide " + "very " * 1000 + "carefully."
_WORLD: Final = (
    "🚀 déploiement 部署 Развёртывание 👨‍👩‍👧‍👦 عربى <!channel> & <https://x.example|x> "
)


def _record(kind: str, payload: dict[str, Any], schema: dict[str, Any] | None) -> Any:
    """A pending request as the runtime stores it (ids of the runtime's shape)."""
    return InteractionRecord(
        interaction_id="int_" + hashlib.sha256(repr((kind, payload)).encode()).hexdigest()[:32],
        run_id="run_0123456789abcdef",
        kind=kind,
        payload=payload,
        response_schema=schema,
        channel="C0CHANNEL",
        thread_ts="1699999999.000001",
        requester="U0REQUEST",
        created_at=1_700_000_000.0,
        expires_at=1_700_086_400.0,
    )


def _approval(arguments: dict[str, Any], rule: Approval, **payload: Any) -> Any:
    body = {"tool": "deploy", "arguments": arguments, "tool_call_id": "call_1", **payload}
    body[RULE_KEY] = rule.to_json()
    return _record("approval", body, APPROVAL_SCHEMA)


def _ask(question: str, options: list[str] | None, *, multi: bool = False) -> Any:
    if multi:
        items = {"type": "string", "enum": options}
        schema: dict[str, Any] = {"type": "array", "items": items, "minItems": 1}
        return _record("ask_user_multi", {"question": question, "options": options}, schema)
    schema = {"type": "string", "enum": options} if options else {"type": "string"}
    return _record("ask_user", {"question": question, "options": options}, schema)


def _options(count: int) -> list[str]:
    return [f"{_WORLD[:20]} choice {i} " + "y" * 50 for i in range(count)]


_EDITABLE_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "service": {"type": "string", "title": _WORLD, "maxLength": 80},
        "version": {"type": "string"},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 50},
        "region": {"enum": _options(150)},
        "notes": {"type": "string", "description": _LONG},
    },
    "required": ["service", "version"],
}


def _requests() -> dict[str, InteractionRecord]:
    arguments = {"service": _WORLD, "version": "2.3", "replicas": 3, "notes": _LONG}
    return {
        "approval": _approval(arguments, Approval()),
        "two-person": _approval(arguments, Approval(count=2, approvers=("U0BOB", "S0OPS"))),
        "question": _ask(_LONG, _options(6)),
        "select of 150": _ask(_WORLD, _options(150)),
        "multi-select": _ask(_WORLD, _options(150), multi=True),
        "free text": _ask(_LONG, None),
        "edit form": _approval(
            arguments, Approval(editable=True), arguments_schema=_EDITABLE_SCHEMA
        ),
        "long arguments": _approval({f"arg{i}": "v" * 5000 for i in range(40)}, Approval()),
    }


def _card(record: InteractionRecord) -> list[Sent]:
    """The card, its pages, how it reads answered and closed, and its modals."""
    sent = [Sent(surface="message", payload=blocks.render_card(record, page=p)) for p in (0, 1)]
    answered = replace(record, status="answered", answered_by="U0BOB", answered_at=1.0)
    for later in (
        blocks.render_answered(answered),
        blocks.render_closed(replace(record, status="expired")),
    ):
        sent.append(Sent(surface="update", payload=later))
    for modal in (blocks.render_modal(record), blocks.render_edit_modal(record)):
        if modal is not None:
            sent.append(Sent(surface="modal", payload=modal))
    return sent


def card_kinds() -> dict[str, list[Sent]]:
    """Every card kind of `CARD_KINDS`, rendered at its extremes, with what the bot sends."""
    requests = _requests()
    kinds = {name: _card(record) for name, record in requests.items()}
    home = blocks.render_home(waiting=list(requests.values()) * 12, decided=[], grants=[])
    kinds["App Home with many requests"] = [Sent(surface="home", payload=home)]
    return {name: kinds[name] for name in CARD_KINDS}


def _offline(sent: Sent) -> str | None:
    try:
        match sent.surface:
            case "message" | "update":
                check_message(sent.payload.get("blocks", []))
                text = str(sent.payload.get("text", ""))
                most = limit("chat.update text" if sent.surface == "update" else "message text")
                if len(text) > most.figure:
                    size = len(text)
                    return f"{most.error}: text of {size} characters (the limit {most.figure})"
            case "modal":
                check_view(dict(sent.payload), kind="modal")
            case "home":
                check_view(dict(sent.payload), kind="home")
            case _ as unreachable:
                assert_never(unreachable)
    except Refusal as refusal:
        return _said(refusal.error, refusal.messages)
    return None


def _said(error: str, messages: Sequence[Any]) -> str:
    first = messages[0] if messages else None
    if isinstance(first, dict):
        first = f"{first.get('message', '')} at {first.get('pointer', '')}"
    return f"{error}: {first}" if first else error


def offline_problems(kinds: Mapping[str, Sequence[Sent]]) -> dict[str, str]:
    """kind -> the first thing Slack would refuse in what it sends (kinds that fit are left
    out), checked against the limit table alone."""
    found: dict[str, str] = {}
    for name, payloads in kinds.items():
        for sent in payloads:
            problem = _offline(sent)
            if problem is not None:
                found[name] = f"{sent.surface}: {problem}"
                break
    return found


@dataclass(kw_only=True, frozen=True)
class SlackVerdict:
    """What `blocks.validate` said of every kind, unless Slack did not check them (`offered`
    false: the method is unknown to the workspace, or refused the call itself)."""

    offered: bool
    problems: dict[str, str]
    refusal: str = ""
    """Why Slack did not check them (its error)."""


_REFUSED: Final = frozenset(
    {"invalid_blocks", "invalid_message", "invalid_view", "invalid_arguments"}
)
"""The answers of `blocks.validate` that judge the payload; any other (`unknown_method`, a
rate limit, ...) means Slack did not check it."""


async def slack_problems(
    client: AsyncWebClient, kinds: Mapping[str, Sequence[Sent]]
) -> SlackVerdict:
    """kind -> what Slack's `blocks.validate` says is wrong in what the bot sends for it."""
    found: dict[str, str] = {}
    for name, payloads in kinds.items():
        for sent in payloads:
            field = "view" if sent.surface in ("modal", "home") else "message"
            try:
                # In the body: slack_sdk's `blocks_validate` puts them in the URL, which a card
                # of 150 options makes longer than servers accept.
                await client.api_call(
                    "blocks.validate", data={field: json.dumps(dict(sent.payload))}
                )
            except SlackApiError as error:
                code = str(error.response.get("error"))
                if code not in _REFUSED:
                    return SlackVerdict(offered=False, problems={}, refusal=code)
                said = error.response.get("errors") or error.response.get(
                    "response_metadata", {}
                ).get("messages", [])
                found[name] = f"{sent.surface}: {_said(code, said)}"
                break
    return SlackVerdict(offered=True, problems=found)
