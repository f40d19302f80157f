"""App Home: the inbox of one person, published with `views.publish` when they open the tab and
when something new waits on them (or what they saw was answered or closed).

A request is listed for someone only when the answer policy would take their answer AND the
policy names them: the approvers' list of an approval (the tool's rule, the tool's list, or
`HANDBACK_APPROVERS`), `HANDBACK_ANSWERERS` for a question, or the person who asked. A card in a
channel is open to "anyone in the channel" when no list is set, but Home has no channel: listing
such a request for everyone would show it to people who cannot see the conversation. Nor is a
request listed for anyone but whoever asked when they cannot see its conversation
(`Visibility`: a DM's requests are its requester's alone, a private channel's or group DM's its
members'). A click in Home is checked against the same rules (`Home.refusal`) on top of the
card's checks.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import blocks
from blocks import Decision
from state import CorruptRecordError, InteractionRecord, is_approval

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._keys import HOME_VIEWER_TTL

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import HomeReads

from .._redact import redact
from ._chat import Chat
from ._policy import AnswerPolicy, GroupLookupFailed, GroupMembers, is_member
from ._tasks import Background
from ._visibility import Visibility

__all__ = ["NOT_IN_HOME", "Home", "home_refusal"]

log = logging.getLogger("handback.slack")

NOT_IN_HOME: Final = (
    "This request is not one you can answer from App Home; answer it on its card in the thread."
)

_PENDING_SCAN: Final = 500
"""Pending requests read to find a person's (the soonest to expire first)."""
_AUDIT_SCAN: Final = 1000
"""Audit entries read to find a person's recent answers."""
_DECIDED: Final = 10
"""Recent answers shown."""
_VIEWER_SCAN: Final = 500
"""Viewers considered when something changes."""
_VIEWERS_FRESH: Final = 10.0
"""Seconds the list of recent viewers is reused before it is read again: a click or a card is
then no extra store round trip (the click path's budget), and someone who opened Home through
another process within that time is refreshed from the next read on."""
_AGENT_CACHE: Final = 10_000
"""Runs whose agent is remembered (emptied when full: a miss is one store read)."""


async def home_refusal(
    policy: AnswerPolicy, record: InteractionRecord, user: str, members: GroupMembers
) -> str | None:
    """Why `record` is not listed in (or answerable from) `user`'s Home, or None: the policy
    must take their answer and name them (see the module docstring). Fails closed."""
    if await policy.refusal(record, user, members) is not None:
        return NOT_IN_HOME
    if record.requester == user and not is_approval(record):
        return None
    try:
        named = policy.approvers_of(record) if is_approval(record) else policy.answerers
        if named and await is_member(user, named, members):
            return None
    except (GroupLookupFailed, CorruptRecordError) as error:
        log.warning("not listing %s in Home for %s: %r", record.interaction_id, user, error)
    return NOT_IN_HOME


class Home:
    """Builds and publishes people's Home views."""

    def __init__(
        self,
        *,
        store: HomeReads,
        chat: Chat,
        policy: AnswerPolicy,
        members: GroupMembers,
        tasks: Background,
        agent_name: str,
        visibility: Visibility,
        clock: Callable[[], float] = time.time,
        viewer_ttl: float = HOME_VIEWER_TTL,
    ) -> None:
        self.store = store
        self.agent_name = agent_name
        """Home lists only this agent's requests: another agent sharing the store resumes its
        own runs, and answers them through its own app."""
        self._agents: dict[str, str | None] = {}
        """Run id -> its agent's name (a run never changes agent), so each run is read once."""
        self.chat = chat
        self.policy = policy
        self.members = members
        self.visibility = visibility
        self.tasks = tasks
        self.clock = clock
        self.viewer_ttl = viewer_ttl
        self._viewers: list[str] = []
        self._viewers_read = -_VIEWERS_FRESH
        """`time.monotonic()` of the last read of `home_viewers`."""

    async def opened(self, user: str) -> bool:
        """`user` opened the Home tab: remember it (so new requests refresh their view) and
        publish the view; False when Slack refused it."""
        await self.store.mark_home_opened(user, ttl=self.viewer_ttl)
        if user not in self._viewers:
            self._viewers.append(user)
        return await self.publish(user)

    async def viewers(self) -> list[str]:
        """Recent Home viewers, read from the store at most every `_VIEWERS_FRESH` seconds."""
        now = time.monotonic()
        if now - self._viewers_read >= _VIEWERS_FRESH:
            self._viewers = list(await self.store.home_viewers(limit=_VIEWER_SCAN))
            self._viewers_read = now
        return list(self._viewers)

    async def publish(self, user: str, *, notice: str | None = None) -> bool:
        """Publish `user`'s view, with `notice` (safe mrkdwn) on top when given."""
        return await self.chat.publish_view(user, await self.view_for(user, notice=notice))

    async def view_for(self, user: str, *, notice: str | None = None) -> dict[str, Any]:
        waiting = await self.waiting_on(user)
        decided = await self.decided_by(user)
        grants = await self.store.active_grants(now=self.clock(), granted_by=user, limit=50)
        return blocks.render_home(
            waiting=waiting,
            decided=decided,
            grants=grants,
            notice=notice,
            base_url=await self.chat.workspace_url(),
        )

    async def waiting_on(self, user: str) -> list[InteractionRecord]:
        """The pending, unexpired requests `user` may answer from Home, soonest to expire
        first."""
        now = self.clock()
        found = []
        for record in await self.store.pending_interactions(limit=_PENDING_SCAN):
            if record.expires_at <= now or not record.channel:
                continue
            if any(vote.user == user for vote in record.votes):
                # Their vote is counted (a rule that needs several): nothing is left for them
                # to do, and a second click is refused; it waits on the others.
                continue
            if await self.refusal(record, user) is None:
                found.append(record)
        return found

    async def refusal(self, record: InteractionRecord, user: str) -> str | None:
        """Why `record` is not listed in (nor answerable from) `user`'s Home, or None: it must
        be this agent's, `home_refusal` must let them, and they must be able to see its
        conversation (asked last: it may be a Slack call)."""
        if await self._agent_of(record.run_id) != self.agent_name:
            return NOT_IN_HOME
        refusal = await home_refusal(self.policy, record, user, self.members)
        if refusal is None and not await self.visibility.can_see(record, user):
            return NOT_IN_HOME
        return refusal

    async def _agent_of(self, run_id: str) -> str | None:
        if run_id not in self._agents:
            if len(self._agents) >= _AGENT_CACHE:
                self._agents.clear()
            try:
                run = await self.store.load_run(run_id)
            except CorruptRecordError:
                log.warning("cannot read run %s for a Home view", run_id)
                return None
            self._agents[run_id] = run.agent_name if run is not None else None
        return self._agents[run_id]

    async def decided_by(self, user: str) -> list[Decision]:
        """`user`'s latest answers (newest first), with their requests while the store has them."""
        decided = []
        for entry in await self.store.recent_audit(limit=_AUDIT_SCAN):
            if entry.user != user or entry.action != "answered":
                continue
            record = None
            if entry.interaction_id is not None:
                try:
                    record = await self.store.get_interaction(entry.interaction_id)
                except CorruptRecordError:
                    log.warning("cannot read %s for a Home view", entry.interaction_id)
            decided.append(Decision(entry=entry, record=record, arguments=_shown(record)))
            if len(decided) == _DECIDED:
                break
        return decided

    def changed(self, records: Iterable[InteractionRecord]) -> None:
        """Requests were posted, answered or closed: refresh, in the background (a turn never
        waits for it), the views of the people who opened Home and may answer one of them."""
        records = list(records)
        if records:
            self.tasks.spawn(self.refresh_for(records), name="home-refresh")

    async def refresh_for(self, records: Sequence[InteractionRecord]) -> int:
        """Republish the view of every recent Home viewer whom one of `records` concerns; how
        many were published. Nobody who never opened Home costs a Slack call."""
        published = 0
        for user in await self.viewers():
            for record in records:
                if await self.refusal(record, user) is None:
                    published += await self.publish(user)
                    break
        return published


def _shown(record: InteractionRecord | None) -> str | None:
    """An approval's arguments as `k=v` pairs, secret-looking values hidden (the runtime hid the
    tool's own `redact` names already), for the "Recently decided" line."""
    if record is None or not is_approval(record):
        return None
    arguments = record.payload.get("arguments")
    if not isinstance(arguments, dict) or not arguments:
        return None
    hidden = redact(arguments)
    return " ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value, default=str)}"
        for key, value in hidden.items()
    )
