"""Slack's side of the wire for the blocks tests: a strict Block Kit checker and the payloads
Slack sends for clicks and modal submissions, shaped as Slack shapes them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

USER = "U0ANSWER1"
CHANNEL = "C0CHANNEL"
MESSAGE_TS = "1700000000.000100"
TRIGGER_ID = "1234567890.123456.abcdef0123456789"

# The only `<…>` sequences our mrkdwn may contain.
_ALLOWED_TOKEN = re.compile(
    r"<@[UW][A-Z0-9]+>|<!subteam\^S[A-Z0-9]+>"
    r"|<!date\^\d+\^\{date_short_pretty\} at \{time\}\|[^<>&|]*>"
)
"""Mentions we write ourselves: a user, a user group (who may approve, from configuration:
`blocks.approver_mentions`), a date. Text we did not write is escaped, so it makes none."""
_ENTITY = re.compile(r"&(?!(amp|lt|gt);)")


class LimitError(AssertionError):
    """A rendered surface that Slack would reject or that could ping or link."""


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise LimitError(message)


def slack_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def check_safe_mrkdwn(text: str, where: str) -> None:
    """No payload text may become a mention, a broadcast or a link."""
    stripped = _ALLOWED_TOKEN.sub("", text)
    _need("<" not in stripped and ">" not in stripped, f"{where}: unescaped < or > in {text!r}")
    _need(not _ENTITY.search(stripped), f"{where}: bare & in {text!r}")


def _text(obj: Any, limit: int, where: str, *, plain_only: bool = False) -> None:
    _need(isinstance(obj, dict), f"{where}: not a text object")
    kind = obj.get("type")
    _need(kind in ("plain_text", "mrkdwn"), f"{where}: text type {kind!r}")
    _need(not (plain_only and kind != "plain_text"), f"{where}: must be plain_text")
    text = obj.get("text")
    _need(isinstance(text, str) and text.strip() != "", f"{where}: empty text")
    _need(slack_len(text) <= limit, f"{where}: {slack_len(text)} chars > {limit}")
    if kind == "mrkdwn":
        check_safe_mrkdwn(text, where)


def _options(options: Any, most: int, where: str) -> None:
    _need(isinstance(options, list) and 1 <= len(options) <= most, f"{where}: options count")
    values = [option["value"] for option in options]
    _need(len(set(values)) == len(values), f"{where}: duplicate option values")
    for option in options:
        _text(option["text"], 75, f"{where}.option", plain_only=True)
        _need(0 < len(option["value"]) <= 150, f"{where}: option value length")


def _element(element: dict[str, Any], where: str) -> None:
    kind = element["type"]
    where = f"{where}.{kind}"
    action_id = element.get("action_id", "")
    _need(0 < len(action_id) <= 255, f"{where}: action_id length")
    match kind:
        case "button":
            _text(element["text"], 75, where, plain_only=True)
            _need(len(element.get("value", "")) <= 2000, f"{where}: value > 2000")
            _need(element.get("style") in (None, "primary", "danger"), f"{where}: style")
        case "static_select":
            _text(element["placeholder"], 150, where, plain_only=True)
            _options(element.get("options"), 100, where)
        case "multi_static_select":
            _text(element["placeholder"], 150, where, plain_only=True)
            _options(element.get("options"), 100, where)
        case "checkboxes":
            _options(element.get("options"), 10, where)
        case "plain_text_input":
            low, high = element.get("min_length", 0), element.get("max_length", 3000)
            _need(0 <= low <= high <= 3000, f"{where}: length bounds {low}..{high}")
        case "number_input":
            decimal = element.get("is_decimal_allowed")
            _need(isinstance(decimal, bool), f"{where}: is_decimal_allowed missing")
            for key in ("min_value", "max_value"):
                if key in element:
                    pattern = r"-?\d+(\.\d+)?" if decimal else r"-?\d+"
                    _need(bool(re.fullmatch(pattern, element[key])), f"{where}: {key}")
        case "datepicker":
            pass
        case _:
            raise LimitError(f"{where}: unexpected element type")


def check_block(block: dict[str, Any], where: str = "block") -> None:
    """Slack's own models must accept it unchanged, and every documented limit must hold."""
    parsed = Block.parse(block)
    _need(parsed is not None, f"{where}: slack_sdk cannot parse {block!r}")
    assert parsed is not None
    parsed.validate_json()
    _need(parsed.to_dict() == block, f"{where}: slack_sdk round trip changed {block!r}")
    kind = block["type"]
    where = f"{where}[{kind}]"
    if "block_id" in block:
        _need(0 < len(block["block_id"]) <= 255, f"{where}: block_id length")
    match kind:
        case "header":
            _text(block["text"], 150, where, plain_only=True)
        case "section":
            _need("text" in block or "fields" in block, f"{where}: no text")
            if "text" in block:
                _text(block["text"], 3000, where)
            fields = block.get("fields", [])
            _need(len(fields) <= 10, f"{where}: more than 10 fields")
            for field in fields:
                _text(field, 2000, f"{where}.field")
        case "context":
            _need(1 <= len(block["elements"]) <= 10, f"{where}: elements count")
            for element in block["elements"]:
                _text(element, 3000, where)
        case "actions":
            elements = block["elements"]
            _need(1 <= len(elements) <= 25, f"{where}: elements count")
            ids = [element["action_id"] for element in elements]
            _need(len(set(ids)) == len(ids), f"{where}: duplicate action_id {ids}")
            for element in elements:
                _element(element, where)
        case "input":
            _text(block["label"], 2000, where, plain_only=True)
            if "hint" in block:
                _text(block["hint"], 2000, where, plain_only=True)
            _element(block["element"], where)
        case "divider":
            _need(set(block) <= {"type", "block_id"}, f"{where}: divider with content")
        case _:
            raise LimitError(f"{where}: unexpected block type")


def _check_blocks(blocks: list[dict[str, Any]], most: int, where: str) -> None:
    _need(1 <= len(blocks) <= most, f"{where}: {len(blocks)} blocks (1..{most})")
    ids = [block["block_id"] for block in blocks if "block_id" in block]
    _need(len(set(ids)) == len(ids), f"{where}: duplicate block_id")
    for index, block in enumerate(blocks):
        check_block(block, f"{where}.blocks[{index}]")


def check_message(message: dict[str, Any]) -> None:
    """A `chat.postMessage` body that Slack accepts and that cannot ping or link."""
    _need(set(message) == {"text", "blocks"}, f"message keys {sorted(message)}")
    text = message["text"]
    _need(isinstance(text, str) and text.strip() != "", "message: empty fallback text")
    _need(slack_len(text) <= 4000, "message: fallback text over 4000")
    check_safe_mrkdwn(text, "message.text")
    _check_blocks(message["blocks"], 50, "message")


def check_view(view: dict[str, Any]) -> None:
    """A `views.open` view that Slack accepts."""
    View(**view).validate_json()
    _need(view["type"] == "modal", "view: not a modal")
    for key in ("title", "submit", "close"):
        _text(view[key], 24, f"view.{key}", plain_only=True)
    _need(0 < len(view["callback_id"]) <= 255, "view: callback_id length")
    _need(0 < len(view["private_metadata"]) <= 3000, "view: private_metadata length")
    _check_blocks(view["blocks"], 100, "view")
    _need(any(block["type"] == "input" for block in view["blocks"]), "view: no input")


_HOME_TOKEN = re.compile(
    r"<#[CDG][A-Z0-9]+>|<https?://[^\s<>|]+/archives/[A-Z0-9]+/p\d+\|Open the thread>"
)
"""Home views also link to channels and threads (our own links, built from ids)."""


def check_home_view(view: dict[str, Any]) -> None:
    """A `views.publish` Home view that Slack accepts and whose text cannot ping or link
    anywhere but to the channels and threads of its requests."""
    View(**view).validate_json()
    _need(view["type"] == "home", "view: not a home view")
    blocks = view["blocks"]
    _need(1 <= len(blocks) <= 100, f"home: {len(blocks)} blocks (1..100)")
    ids = [block["block_id"] for block in blocks if "block_id" in block]
    _need(len(set(ids)) == len(ids), "home: duplicate block_id")
    for index, block in enumerate(blocks):
        check_block(_without_links(block), f"home.blocks[{index}]")


def _without_links(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_links(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_links(item) for item in value]
    if isinstance(value, str):
        return _HOME_TOKEN.sub("", value) or value
    return value


def elements(blocks: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """`(block, element)` for every interactive element of a message."""
    for block in blocks:
        if block["type"] == "actions":
            for element in block["elements"]:
                yield block, element
        elif block["type"] == "input":
            yield block, block["element"]


def find(message: dict[str, Any], action_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    for block, element in elements(message["blocks"]):
        if element["action_id"] == action_id:
            return block, element
    raise LookupError(f"no element {action_id!r} in the message")


def _option_ref(option: dict[str, Any]) -> dict[str, Any]:
    return {"text": option["text"], "value": option["value"]}


def _message_state(
    message: dict[str, Any], chosen: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for block, element in elements(message["blocks"]):
        kind = element["type"]
        state: dict[str, Any]
        picked = chosen.get(element["action_id"], [])
        if kind == "static_select":
            state = {"type": kind, "selected_option": _option_ref(picked[0]) if picked else None}
        elif kind in ("multi_static_select", "checkboxes"):
            state = {"type": kind, "selected_options": [_option_ref(o) for o in picked]}
        else:
            continue
        values.setdefault(block["block_id"], {})[element["action_id"]] = state
    return values


def click(
    message: dict[str, Any],
    action_id: str,
    *,
    option_values: list[str] | None = None,
    state: dict[str, list[str]] | None = None,
    user: str = USER,
) -> dict[str, Any]:
    """The `block_actions` payload Slack sends when `user` uses the element `action_id`.

    `option_values` picks options of a select/checkboxes being clicked; `state` ticks options of
    other stateful elements beforehand (by action id), as the message state Slack attaches.
    """
    block, element = find(message, action_id)
    kind = element["type"]
    action: dict[str, Any] = {
        "type": kind,
        "action_id": element["action_id"],
        "block_id": block["block_id"],
        "action_ts": "1700000001.000200",
    }
    by_value = {o["value"]: o for o in element.get("options", [])}
    chosen: dict[str, list[dict[str, Any]]] = {}
    for other_id, values in (state or {}).items():
        _, other = find(message, other_id)
        other_options = {o["value"]: o for o in other["options"]}
        chosen[other_id] = [other_options.get(v, {"text": {}, "value": v}) for v in values]
    picked = [
        by_value.get(v, {"text": {"type": "plain_text", "text": v}, "value": v})
        for v in option_values or []
    ]
    if kind == "button":
        # Slack echoes a plain_text object with `emoji` set, whether or not the app set it.
        action["text"] = {"emoji": True, **element["text"]}
        action["value"] = element["value"]
        if "style" in element:
            action["style"] = element["style"]
    elif kind == "static_select":
        action["selected_option"] = _option_ref(picked[0])
        action["placeholder"] = element["placeholder"]
        chosen[action_id] = picked
    else:
        action["selected_options"] = [_option_ref(o) for o in picked]
        chosen[action_id] = picked
    return {
        "type": "block_actions",
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "token": "verification-token",
        "container": {
            "type": "message",
            "message_ts": MESSAGE_TS,
            "channel_id": CHANNEL,
            "is_ephemeral": False,
        },
        "trigger_id": TRIGGER_ID,
        "team": {"id": "T0TEAM", "domain": "example"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": CHANNEL, "name": "ops"},
        # As Slack shows the app's own message (bot_profile left out: Slack sends it only for
        # some messages).
        "message": {
            "user": "U0BOTUSER",
            "type": "message",
            "ts": MESSAGE_TS,
            "bot_id": "B0BOT",
            "app_id": "A0APP",
            "text": message["text"],
            "team": "T0TEAM",
            "blocks": message["blocks"],
        },
        "state": {"values": _message_state(message, chosen)},
        "response_url": "https://hooks.slack.com/actions/T0TEAM/1/abc",
        "actions": [action],
    }


def submit(
    view: dict[str, Any], entries: dict[str, Any] | None = None, *, user: str = USER
) -> dict[str, Any]:
    """The `view_submission` payload for `view` with `entries` by block id.

    An entry is a str for text/number inputs, the date for a datepicker, or a list of option
    values for selects and checkboxes; inputs without an entry are submitted empty.
    """
    entries = entries or {}
    values: dict[str, Any] = {}
    for block in view["blocks"]:
        if block["type"] != "input":
            continue
        element = block["element"]
        kind = element["type"]
        entry = entries.get(block["block_id"])
        state: dict[str, Any] = {"type": kind}
        if kind in ("plain_text_input", "number_input"):
            state["value"] = entry
        elif kind == "datepicker":
            state["selected_date"] = entry
        else:
            options = {o["value"]: o for o in element["options"]}
            picked = [
                _option_ref(options.get(v, {"text": {"type": "plain_text", "text": v}, "value": v}))
                for v in entry or []
            ]
            if kind == "static_select":
                state["selected_option"] = picked[0] if picked else None
            else:
                state["selected_options"] = picked
        values[block["block_id"]] = {element["action_id"]: state}
    return {
        "type": "view_submission",
        "team": {"id": "T0TEAM", "domain": "example"},
        "user": {"id": user, "username": "alice", "name": "alice", "team_id": "T0TEAM"},
        "api_app_id": "A0APP",
        "token": "verification-token",
        "trigger_id": TRIGGER_ID,
        "view": {
            "id": "V0VIEW",
            "team_id": "T0TEAM",
            "type": "modal",
            "blocks": view["blocks"],
            "private_metadata": view["private_metadata"],
            "callback_id": view["callback_id"],
            "state": {"values": values},
            "hash": "1700000002.abcdef",
            "title": view["title"],
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": view.get("close"),
            "submit": view.get("submit"),
            "previous_view_id": None,
            "root_view_id": "V0VIEW",
            "app_id": "A0APP",
            "external_id": "",
            "app_installed_team_id": "T0TEAM",
            "bot_id": "B0BOT",
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }
