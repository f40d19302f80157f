"""LocalSlack's in-memory workspace: its people, channels, messages and modals, and the app (the
bot) installed in it, as Slack keeps them."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..slack._manifest import BOT_SCOPES
from ._changes import ChangeFeed
from ._messages import Message, MessageLog
from ._rules import RateLimits

__all__ = [
    "AgentSession",
    "ApiCall",
    "Channel",
    "Ephemeral",
    "Message",
    "OpenedView",
    "SessionStatus",
    "User",
    "Workspace",
]

SessionStatus = Literal["processing", "active", "suspended", "closed"]
"""The statuses of an agent session (`agents.sessions.setStatus`)."""


@dataclass(kw_only=True)
class Ephemeral:
    """A message only one person sees."""

    channel: str
    user: str
    text: str
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    message_ts: str = ""


@dataclass(kw_only=True)
class OpenedView:
    """A modal the bot opened for a person."""

    id: str
    user: str
    view: dict[str, Any]
    trigger_id: str
    hash: str = ""
    closed: bool = False


@dataclass(kw_only=True)
class ApiCall:
    """One Web API call the bot made, as received."""

    method: str
    args: dict[str, Any]
    at: float
    status: int = 200
    peer_port: int | None = None
    """The TCP port the call came from, so a test with several bot processes can tell which
    process made it."""


@dataclass(kw_only=True)
class AgentSession:
    """A thread's agent session, as `agents.sessions.setStatus` and `chat.stopStream` left it."""

    channel: str
    thread_ts: str
    status: SessionStatus
    title: str = ""
    initiator_user_id: str | None = None
    history: list[SessionStatus] = field(default_factory=list)
    """Every status it was given, in order."""


@dataclass(kw_only=True)
class User:
    """A person, or the bot, in the workspace."""

    id: str
    name: str
    is_bot: bool = False


@dataclass(kw_only=True)
class Channel:
    """A channel, a person's direct-message channel with the bot (`is_im`), or a group DM of
    several people and the bot (`is_mpim`)."""

    id: str
    name: str
    is_im: bool = False
    im_user: str | None = None
    is_mpim: bool = False
    is_private: bool = False
    """A private channel (Slack's `is_group`): only its members see it."""
    members: list[str] | None = None
    """Who is in it, the bot included, in the order they joined; None: everyone in the
    workspace, now and later (the default of the channels tests use)."""


class Workspace(ChangeFeed):
    """One Slack workspace with the bot's app installed: what it holds and the queries over it.

    Whoever changes it publishes the change on the feed it extends.
    """

    def __init__(
        self,
        *,
        team_id: str,
        api_app_id: str,
        bot_user_id: str,
        bot_id: str,
        bot_token: str,
        app_token: str,
        with_demo_people: bool,
    ) -> None:
        super().__init__()
        self.team_id = team_id
        self.api_app_id = api_app_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.bot_token = bot_token
        self.app_token = app_token
        self.scopes: list[str] = list(BOT_SCOPES)
        """What the bot token was granted; Slack says so in each answer's `x-oauth-scopes`."""

        self.users: dict[str, User] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.channels: dict[str, Channel] = {}
        self.messages = MessageLog()
        """Every message, in the order posted, found by where it is in O(1)."""
        self.ephemerals: list[Ephemeral] = []
        self.views: dict[str, OpenedView] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        """user -> the App Home view the app last published for them (`views.publish`)."""
        self.sessions: dict[tuple[str, str], AgentSession] = {}
        """(channel, thread_ts) -> the thread's agent session."""
        self.agent_refusal: str | None = None
        """None: the app is declared as an agent and may use the agent methods. Else the error
        Slack gives an app that is not (`not_authorized`, `missing_scope`, `unknown_method`)
        for each of them."""
        self.calls: list[ApiCall] = []
        self.triggers: dict[str, str] = {}
        """trigger_id -> the user whose action issued it (`views.open` redeems it)."""
        self.trigger_times: dict[str, float] = {}
        """trigger_id -> when it was issued (`clock`); `views.open` refuses it 3 s later."""
        self.rate_limits = RateLimits()
        """Slack's per-method rate limits by tier; off until a test sets `rate_limits.on`."""
        self.selections: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
        """(channel, message ts, user) -> block_id -> action_id -> element state."""

        self.clock: Callable[[], float] = time.time
        """Where message timestamps come from (seconds since the epoch); tests may set it."""
        self._last_ts_us = 0
        self._ids = itertools.count(1)

        self.add_user(bot_user_id, "handback", is_bot=True)
        if with_demo_people:
            self.add_user("U0ALICE", "alice")
            self.add_user("U0BOB", "bob")
            self.add_user("U0CAROL", "carol")
            self.add_user("U0DAVE", "dave")
            self.add_usergroup("S0OPS", ["U0BOB", "U0CAROL"])
            self.add_channel("C0GENERAL", "general")
            self.add_channel("C0DEPLOYS", "deploys")

    def add_user(self, user_id: str, name: str, *, is_bot: bool = False) -> None:
        self.users[user_id] = User(id=user_id, name=name, is_bot=is_bot)

    def add_usergroup(self, group_id: str, members: Iterable[str]) -> None:
        self.usergroups[group_id] = list(members)

    def add_channel(
        self,
        channel_id: str,
        name: str,
        *,
        private: bool = False,
        members: Iterable[str] | None = None,
    ) -> None:
        """A channel; with `members` only they and the bot are in it, else everyone is."""
        listed = None if members is None else self._with_bot(members)
        self.channels[channel_id] = Channel(
            id=channel_id, name=name, is_private=private, members=listed
        )

    def add_group_dm(self, channel_id: str, members: Iterable[str]) -> None:
        """A group DM (`mpim`) of `members` and the bot; Slack names it after its members."""
        members = list(members)
        name = "mpdm-" + "--".join(self.users[m].name for m in members)
        self.channels[channel_id] = Channel(
            id=channel_id, name=name, is_mpim=True, members=self._with_bot(members)
        )

    def _with_bot(self, members: Iterable[str]) -> list[str]:
        return list(dict.fromkeys([*members, self.bot_user_id]))

    def channel_members(self, channel_id: str) -> list[str]:
        """Who is in the channel, the bot included (a KeyError for an unknown channel)."""
        channel = self.channels[channel_id]
        if channel.members is None:
            return list(self.users)
        return list(channel.members)

    def join(self, channel_id: str, user: str) -> None:
        """`user` joins the channel (a channel everyone is in first lists everyone)."""
        members = self.channel_members(channel_id)
        if user not in members:
            members.append(user)
        self.channels[channel_id].members = members

    def leave(self, channel_id: str, user: str) -> None:
        """`user` leaves the channel (a channel everyone is in first lists everyone)."""
        self.channels[channel_id].members = [
            m for m in self.channel_members(channel_id) if m != user
        ]

    def dm_channel(self, user: str) -> str:
        """The direct-message channel between `user` and the bot (created on first use)."""
        for channel in self.channels.values():
            if channel.is_im and channel.im_user == user:
                return channel.id
        channel_id = f"D0{user.removeprefix('U')}"
        self.channels[channel_id] = Channel(
            id=channel_id,
            name=user,
            is_im=True,
            im_user=user,
            members=[user, self.bot_user_id],
        )
        return channel_id

    def new_ts(self) -> str:
        """A message timestamp later than every one before it, from the clock as in Slack (a
        message's `ts` is when it was posted; the page shows it as the message's time)."""
        now_us = int(self.clock() * 1_000_000)
        self._last_ts_us = max(now_us, self._last_ts_us + 1)
        seconds, micros = divmod(self._last_ts_us, 1_000_000)
        return f"{seconds}.{micros:06d}"

    def new_trigger_id(self) -> str:
        """A trigger id, issued now: it expires as Slack's do (`trigger_times`)."""
        trigger_id = f"{next(self._ids)}.{uuid.uuid4().hex[:12]}"
        self.trigger_times[trigger_id] = self.clock()
        return trigger_id

    def new_event_id(self) -> str:
        return f"Ev{next(self._ids):08d}{uuid.uuid4().hex[:6]}"

    def message(self, channel: str, ts: str) -> Message | None:
        return self.messages.get(channel, ts)

    def find_message(self, ts: str) -> Message | None:
        """The message `ts` in any channel (the first posted, should two share it)."""
        return self.messages.find(ts)

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's parent and replies, oldest first."""
        return self.messages.thread(channel, thread_ts)

    def bot_messages(
        self, channel: str | None = None, thread_ts: str | None = None
    ) -> list[Message]:
        """The messages the bot posted (in `channel`, in the thread `thread_ts`), as the
        benchmark's drivers read a thread's outcome."""
        return [
            m
            for m in self.messages
            if m.bot_id == self.bot_id
            and (channel is None or m.channel == channel)
            and (thread_ts is None or m.thread_ts == thread_ts)
        ]

    def ephemerals_for(self, user: str) -> list[Ephemeral]:
        return [e for e in self.ephemerals if e.user == user]

    def find_ephemeral(self, user: str, ts: str) -> Ephemeral | None:
        """The ephemeral message `ts` shown to `user` (no one else sees it, nor clicks it)."""
        for ephemeral in self.ephemerals:
            if ephemeral.user == user and ephemeral.message_ts == ts:
                return ephemeral
        return None

    def open_view(self, user: str, view_id: str) -> OpenedView:
        """The modal `view_id`, still open and opened for `user` (who is about to act on it)."""
        opened = self.views.get(view_id)
        if opened is None or opened.closed:
            raise KeyError(f"no open view {view_id!r}")
        if opened.user != user:
            raise ValueError(f"view {view_id!r} was opened for {opened.user!r}, not {user!r}")
        return opened
