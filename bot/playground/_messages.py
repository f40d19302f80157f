"""The messages of LocalSlack's workspace as Slack stores them, and the log that keeps them in the
order posted and finds one by its channel and ts, or a thread's, without scanning them all (a
scan was a tenth of a 1,000-click burst)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

__all__ = ["Message", "MessageLog"]


@dataclass(kw_only=True)
class Message:
    """A message in a channel, as Slack stores it."""

    channel: str
    ts: str
    text: str = ""
    user: str | None = None
    """The author for people's messages."""
    bot_id: str | None = None
    """Set on messages the bot posted."""
    thread_ts: str | None = None
    blocks: list[dict[str, Any]] = field(default_factory=list)
    reactions: dict[str, list[str]] = field(default_factory=dict)
    """Reaction name -> the users who added it."""
    edited: bool = False
    streaming: bool = False
    """A message the app is streaming into (`chat.startStream`) and has not stopped yet."""
    stopped_by_user: bool = False
    """A person pressed stop while it streamed: Slack answers `stopped_by_user` from then on."""
    chunks: list[dict[str, Any]] = field(default_factory=list)
    """Every chunk streamed into the message, in order, as sent (`markdown_text` included as
    `markdown_text` chunks)."""

    def tasks(self) -> dict[str, dict[str, Any]]:
        """The streamed tasks by id, each as its latest `task_update` left it."""
        tasks: dict[str, dict[str, Any]] = {}
        for chunk in self.chunks:
            if chunk.get("type") == "task_update":
                tasks[str(chunk["id"])] = {**tasks.get(str(chunk["id"]), {}), **chunk}
        return tasks

    def to_api(self) -> dict[str, Any]:
        """The message as the Web API and the Events API show it."""
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.user:
            out["user"] = self.user
        if self.bot_id:
            out["bot_id"] = self.bot_id
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if self.blocks:
            out["blocks"] = self.blocks
        if self.chunks:
            out["chunks"] = self.chunks
        if self.streaming:
            out["streaming"] = True
        if self.reactions:
            out["reactions"] = [
                {"name": name, "users": users, "count": len(users)}
                for name, users in self.reactions.items()
            ]
        return out


class MessageLog(Sequence[Message]):
    """The workspace's messages in the order posted, indexed by where they are.

    A message's `channel`, `ts` and `thread_ts` do not change once it is in the log (Slack never
    moves a message); what it says may. As a list's `remove` does, `remove` takes out the first
    message equal to the one given.
    """

    def __init__(self) -> None:
        self._posted: list[Message] = []
        self._at: dict[tuple[str, str], list[Message]] = {}
        """(channel, ts) -> the messages there, in the order posted (one, unless a test forges
        a second)."""
        self._by_ts: dict[str, list[Message]] = {}
        self._threads: dict[tuple[str, str], list[Message]] = {}
        """(channel, thread ts) -> the thread's parent and replies, in the order posted."""

    def _keys(self, message: Message) -> Iterator[tuple[dict[Any, list[Message]], Any]]:
        yield self._at, (message.channel, message.ts)
        yield self._by_ts, message.ts
        yield self._threads, (message.channel, message.ts)
        if message.thread_ts and message.thread_ts != message.ts:
            yield self._threads, (message.channel, message.thread_ts)

    def append(self, message: Message) -> None:
        self._posted.append(message)
        for index, key in self._keys(message):
            index.setdefault(key, []).append(message)

    def remove(self, message: Message) -> None:
        """Take out the first message equal to `message` (a ValueError if there is none)."""
        self._posted.remove(message)
        for index, key in self._keys(message):
            found = index[key]
            found.remove(message)
            if not found:
                del index[key]

    def clear(self) -> None:
        self._posted.clear()
        self._at.clear()
        self._by_ts.clear()
        self._threads.clear()

    def get(self, channel: str, ts: str) -> Message | None:
        """The message `ts` in `channel`."""
        found = self._at.get((channel, ts))
        return found[0] if found else None

    def find(self, ts: str) -> Message | None:
        """The message `ts` in any channel (the first posted, should two share it)."""
        found = self._by_ts.get(ts)
        return found[0] if found else None

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """The thread's parent and replies, oldest first."""
        return list(self._threads.get((channel, thread_ts), ()))

    def __len__(self) -> int:
        return len(self._posted)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._posted)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._posted[index]

    def __repr__(self) -> str:
        return f"MessageLog({self._posted!r})"
