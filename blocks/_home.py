"""The App Home view of one person: what waits on them, what they decided lately, what ran
under the standing grants they gave (apart from their own decisions), and those grants.

Each waiting request carries the card's own controls (`_card.controls`: the same block and
action ids), so a click in Home is the same reference to the same stored interaction as a click
on the card, and goes through the same claim. Pure: the app reads the store and publishes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from state import AuditEntry, Grant, InteractionRecord, is_approval, used_grant

from ._card import controls
from ._ids import ACTION_MORE, ACTION_REVOKE, block_id, parse_action_id
from ._kit import SECTION_LIMIT, context, header, section
from ._outcome import approval_outcome
from ._summary import fallback, summary_blocks
from ._text import cut_mrkdwn, date_token, inline_code, mention, plain, slack_len, to_display
from ._votes import approvers_needed, names

__all__ = [
    "HOME_BLOCK_LIMIT",
    "NOTICE_BLOCK",
    "Decision",
    "grant_blocks",
    "home_with_notice",
    "render_home",
]

HOME_BLOCK_LIMIT: Final = 100
"""Slack refuses a Home view of more blocks than this."""

_DECIDED_ROOM: Final = 14
_GRANTS_SHOWN: Final = 8
"""Grants listed with their Revoke button: with their header and a "more" line they stay
within the room kept after the waiting requests."""
"""Blocks kept for the sections after the waiting requests (headers, lines, notices)."""
_LINK_LIMIT: Final = 1000

NOTICE_BLOCK: Final = "hb-notice"
"""The block id of the notice on top of a Home view, so a new notice replaces the last one."""


@dataclass(kw_only=True, frozen=True)
class Decision:
    """One answer the person gave (an `answered` audit entry), with the request when the store
    still has it."""

    entry: AuditEntry
    record: InteractionRecord | None = None
    arguments: str | None = None
    """The request's arguments as they may be shown (`k=v` pairs, secret-looking values
    already hidden by the caller); None shows none: raw arguments are never drawn here."""

    @property
    def under_grant(self) -> bool:
        """Approved by a standing grant the person gave, not by their own click."""
        if self.record is not None and used_grant(self.record) is not None:
            return True
        return "under standing grant grant_" in self.entry.detail


def _thread_link(base_url: str | None, channel: str, ts: str | None) -> str | None:
    """The permalink of a message (`<workspace url>archives/<channel>/p<ts digits>`), or None
    when the workspace's URL or the message is unknown."""
    if not base_url or not channel or not ts:
        return None
    digits = ts.replace(".", "")
    if not (digits.isdigit() and channel.isalnum()):
        return None
    return f"{base_url.rstrip('/')}/archives/{channel}/p{digits}"


def _waiting_blocks(record: InteractionRecord, base_url: str | None) -> list[dict[str, Any]]:
    # Paging buttons would page the card in the thread, not this view: Home shows the first page
    # and the card's "search all" form, which lists every option.
    shown = []
    for block in controls(record, 0):
        if block.get("type") == "actions":
            elements = [
                element
                for element in block["elements"]
                if parse_action_id(str(element.get("action_id", ""))) != ACTION_MORE
            ]
            block = {**block, "elements": elements}
        shown.append(block)
    where = []
    link = _thread_link(base_url, record.channel, record.message_ts or record.thread_ts)
    if link is not None and len(link) < _LINK_LIMIT:
        where.append(f"<{link}|Open the thread>")
    elif record.channel:
        where.append(f"In <#{record.channel}>")
    if record.requester and not is_approval(record):
        where.append(f"Requested by {mention(record.requester)}")
    if record.expires_at > 0:
        where.append(f"Expires {date_token(record.expires_at)}")
    tail = [context(" · ".join(where))] if where else []
    return summary_blocks(record) + shown + tail + [{"type": "divider"}]


def _decision_line(decision: Decision) -> str:
    """One line per answer: what (the tool and its arguments, or the question), who asked,
    who decided (you, with the other voters of a two-person rule) and when, so that five
    deploys are five different lines."""
    entry, record = decision.entry, decision.record
    when = date_token(entry.at)
    if record is None:
        what = inline_code(entry.interaction_id or "a request", 80)
        return f"• {what}: {cut_mrkdwn(entry.detail, 120)} · {when}"
    asked = f"asked by {mention(record.requester)}" if record.requester else "asked"
    if not is_approval(record):
        return f"• Answered {fallback(record)}, {asked} · {when}"
    what = inline_code(to_display(record.payload.get("tool", "?")), 80)
    if decision.arguments:
        what += " " + inline_code(decision.arguments, 160)
    if decision.under_grant:
        grant = inline_code(used_grant(record) or "a grant", 40)
        return f"• Ran {what}, {asked}, under your grant {grant} · {when}"
    others = [vote.user for vote in record.votes if vote.user != entry.user]
    who = "you" + (f" with {names(others)}" if others else "")
    if record.status == "pending":
        # A vote under a two-person rule: counted, and the request still waits for more.
        needed = approvers_needed(record)
        return (
            f"• Approved {what}, {asked}, by {who} ({len(record.votes)} of {needed}), waiting "
            f"for more approvers · {when}"
        )
    verb, _ = approval_outcome(record.answer)
    if verb != "Approved":
        who = "you"
    return f"• {verb} {what}, {asked}, by {who} · {when}"


def _lines_section(lines: Sequence[str]) -> dict[str, Any]:
    """Safe mrkdwn lines (each bounded where it is built) in one section, as many as fit."""
    text = ""
    for line in lines:
        candidate = f"{text}\n{line}" if text else line
        if slack_len(candidate) > SECTION_LIMIT:
            break
        text = candidate
    return section(text)


def grant_blocks(grants: Sequence[Grant]) -> list[dict[str, Any]]:
    """The "grants you gave" part of Home: a header and one line per grant in force (tool,
    where, until when) with a button that revokes it, or a line saying there are none."""
    blocks = [header("Standing grants you gave")]
    if not grants:
        return [*blocks, context("You have given no standing grants.")]
    shown = grants[:_GRANTS_SHOWN]
    for grant in shown:
        where = (
            f"this thread of <#{grant.channel}>"
            if grant.scope == "thread"
            else f"<#{grant.channel}>"
        )
        tool = inline_code(grant.tool, 100)
        revoke = {
            "type": "button",
            "action_id": ACTION_REVOKE,
            "text": plain("Revoke", 75),
            "value": grant.grant_id,
            "style": "danger",
        }
        if grant.needs_renewal:
            # Stored before grants were bound: listed so its giver knows it approves nothing.
            text = (
                f"• {tool} in {where}: *needs renewal*, it approves nothing now (given before "
                "grants were bound to one tool and requester; cards ask instead)"
            )
        else:
            who = ", ".join(mention(user) for user in grant.requesters[:5])
            more = len(grant.requesters) - 5
            who += f" and {more} more" if more > 0 else ""
            text = (
                f"• {tool} in {where}, for requests by {who}, until {date_token(grant.expires_at)}"
            )
        line = section(text)
        blocks.append({**line, "block_id": block_id(grant.grant_id, "revoke"), "accessory": revoke})
    if len(grants) > len(shown):
        more = len(grants) - len(shown)
        blocks.append(context(f"{more} more are in force; `handback grants` lists them all."))
    return blocks


def render_home(
    *,
    waiting: Sequence[InteractionRecord],
    decided: Sequence[Decision],
    grants: Sequence[Grant] | None = None,
    notice: str | None = None,
    base_url: str | None = None,
) -> dict[str, Any]:
    """The `views.publish` view: `notice` (safe mrkdwn we wrote, e.g. why a click was refused)
    on top, then every waiting request with its controls while they fit in Slack's 100
    blocks, what was decided, and `grants` (None: the section is left out)."""
    blocks: list[dict[str, Any]] = []
    if notice:
        blocks.append(_notice(notice))
    blocks.append(header("Waiting on you"))
    room = HOME_BLOCK_LIMIT - _DECIDED_ROOM - len(blocks)
    left_out = 0
    for record in waiting:
        drawn = _waiting_blocks(record, base_url)
        if left_out or len(drawn) > room:
            left_out += 1
            continue
        blocks += drawn
        room -= len(drawn)
    if not waiting:
        blocks.append(context("Nothing waits on you now."))
    elif left_out:
        blocks.append(context(f"{left_out} more wait on you; their cards are in their threads."))
    blocks.append(header("Recently decided"))
    own = [decision for decision in decided if not decision.under_grant]
    granted = [decision for decision in decided if decision.under_grant]
    if own:
        blocks.append(_lines_section([_decision_line(decision) for decision in own]))
    else:
        blocks.append(context("You have not answered anything lately."))
    if granted:
        # Not the person's own decisions: whoever asked ran them under a grant they gave.
        blocks.append(header("Run under your standing grants"))
        blocks.append(_lines_section([_decision_line(decision) for decision in granted]))
    if grants is not None:
        blocks += grant_blocks(grants)
    return {"type": "home", "blocks": blocks[:HOME_BLOCK_LIMIT]}


def home_with_notice(shown: Any, notice: str) -> dict[str, Any]:
    """The Home view a person has open (`view` of their Home click's payload, as Slack sent it),
    again, with `notice` (safe mrkdwn we wrote) on top in place of any earlier notice: for telling
    them something when the store cannot be read to draw the view afresh. Anything but a Home
    view with a list of blocks becomes the notice alone."""
    kept: list[dict[str, Any]] = []
    if isinstance(shown, dict) and shown.get("type") == "home":
        drawn = shown.get("blocks")
        if isinstance(drawn, list):
            kept = [
                block
                for block in drawn
                if isinstance(block, dict) and block.get("block_id") != NOTICE_BLOCK
            ]
    return {"type": "home", "blocks": [_notice(notice), *kept][:HOME_BLOCK_LIMIT]}


def _notice(text: str) -> dict[str, Any]:
    return {**section(f":warning: {text}"), "block_id": NOTICE_BLOCK}
