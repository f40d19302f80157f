"""The state of the elements people act on: which element of a surface's blocks a click names,
the `actions[0]` it sends, the options a select picks (remembered as the surface's state), and
what a modal's inputs hold when it is submitted."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from ._workspace_model import Workspace

__all__ = ["clicked_action", "input_state"]


def clicked_action(
    workspace: Workspace,
    blocks: list[dict[str, Any]],
    state_key: tuple[str, str, str],
    user: str,
    action_id: str,
    value: str | None,
    selected: str | list[str] | None,
) -> dict[str, Any]:
    """The `actions[0]` of a click on the element `action_id` of `blocks`; what a select picks
    is remembered as the surface's state under `state_key`."""
    block, element = _find_element(blocks, action_id, value)
    action: dict[str, Any] = {
        "action_id": action_id,
        "block_id": block.get("block_id", ""),
        "type": element["type"],
        "action_ts": f"{time.time():.6f}",
    }

    def remember(state: dict[str, Any]) -> None:
        values = workspace.selections.setdefault(state_key, {})
        values.setdefault(str(block.get("block_id", "")), {})[action_id] = state

    kind = element["type"]
    if kind == "button":
        action["value"] = element.get("value", "") if value is None else value
        # Slack echoes a plain_text object with `emoji` set, whether or not the app set it.
        action["text"] = {"emoji": True, **element.get("text", {})}
    elif kind in {"static_select", "radio_buttons", "external_select"}:
        if selected is None or isinstance(selected, list):
            raise ValueError(f"{kind} needs one `selected` option")
        option = _find_option(element, selected)
        action["selected_option"] = option
        remember({"type": kind, "selected_option": option})
    elif kind in {"multi_static_select", "checkboxes"}:
        picks = [selected] if isinstance(selected, str) else list(selected or [])
        options = [_find_option(element, pick) for pick in picks]
        action["selected_options"] = options
        remember({"type": kind, "selected_options": options})
    else:
        raise ValueError(f"LocalSlack cannot act on a {kind!r} element")
    return action


def _elements(blocks: list[dict[str, Any]]) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    for block in blocks:
        if block.get("type") == "actions":
            for element in block.get("elements", []):
                yield block, element
        elif block.get("type") in {"section", "input"}:
            element = block.get("accessory") or block.get("element")
            if element:
                yield block, element


def _find_element(
    blocks: list[dict[str, Any]], action_id: str, value: str | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    found = [(b, e) for b, e in _elements(blocks) if e.get("action_id") == action_id]
    if len(found) > 1 and value is not None:
        found = [(b, e) for b, e in found if e.get("value") == value] or found
    if not found:
        ids = sorted({str(e.get("action_id")) for _, e in _elements(blocks)})
        raise KeyError(f"no element with action_id {action_id!r}; the message has {ids!r}")
    return found[0]


def _find_option(element: Mapping[str, Any], pick: str) -> dict[str, Any]:
    options = [*element.get("options", [])]
    for group in element.get("option_groups", []):
        options.extend(group.get("options", []))
    for option in options:
        if option.get("value") == pick or option.get("text", {}).get("text") == pick:
            return dict(option)
    raise KeyError(f"{element.get('type')} {element.get('action_id')!r} offers no option {pick!r}")


def input_state(element: Mapping[str, Any], value: Any) -> dict[str, Any]:
    """The state of the input `element` of a submitted modal, filled with `value`."""
    kind = str(element.get("type"))
    if kind in {"plain_text_input", "email_text_input", "url_text_input", "number_input"}:
        return {"type": kind, "value": None if value is None else str(value)}
    if kind == "datepicker":
        return {"type": kind, "selected_date": value}
    if kind in {"static_select", "radio_buttons"}:
        option = None if value is None else _find_option(element, str(value))
        return {"type": kind, "selected_option": option}
    if kind in {"multi_static_select", "checkboxes"}:
        picks = [] if value is None else [value] if isinstance(value, str) else list(value)
        return {"type": kind, "selected_options": [_find_option(element, p) for p in picks]}
    raise ValueError(f"LocalSlack cannot fill a {kind!r} input")
