"""The worker side of the Slack app: what each inbox item (an event, a click, a modal answer, a
recovery) does, once the web side has recorded it and acked Slack."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Final, Literal, TypeGuard, assert_never, get_args

import blocks
from state import StoreError, WorkItem

# A combination of the store's boundaries named for its user, kept out of state.__all__
from state._protocol import Routing

from ._answers import Answers, user_and_channel
from ._chat import Chat
from ._commands import Commands
from ._conversation import Conversations
from ._turns import Thread
from ._worker import Work

__all__ = [
    "NOT_RECORDED",
    "SORRY",
    "WORK_KINDS",
    "Dispatch",
    "WorkKind",
    "is_work_kind",
    "mention_of",
]

WorkKind = Literal["event", "action", "view", "stop", "command", "recover"]
"""What an inbox item is: a Slack event, a click, a modal's answer, a stop, a slash command, or
the resume of a settled run (`Recovery`)."""

WORK_KINDS: Final = frozenset(get_args(WorkKind))

log = logging.getLogger("handback.slack")

SORRY = "Sorry, something went wrong on my side. The details are in the bot's log."

NOT_RECORDED = (
    "Sorry, I could not record that just now, so nothing happened. Please try again in a moment."
)


class Dispatch:
    """Runs inbox items; `work` is the worker's handler."""

    def __init__(
        self, *, store: Routing, chat: Chat, answers: Answers, conversations: Conversations
    ) -> None:
        self.store = store
        self.chat = chat
        self.answers = answers
        self.conversations = conversations
        self.commands = Commands(agent=conversations.agent, chat=chat, conversations=conversations)
        self._thread_tails: dict[tuple[str, str], asyncio.Task[Any]] = {}
        """The last event being worked for each thread."""

    async def not_recorded(self, body: dict[str, Any]) -> None:
        """Tell the person who clicked that nothing was recorded, so they try again: in the
        channel (ephemeral), or, for a click in App Home (no channel), on top of the view they
        have open, drawn again from the payload since the store is what failed."""
        user, channel = user_and_channel(body)
        if user and channel:
            await self.chat.ephemeral(channel, user, NOT_RECORDED)
        elif user and isinstance(body.get("view"), dict) and body["view"].get("type") == "home":
            await self.chat.publish_view(user, blocks.home_with_notice(body["view"], NOT_RECORDED))

    async def work(self, item: WorkItem) -> None:
        """One inbox item; a `StoreError` leaves it in the inbox to be taken again."""
        body = item.body
        work = Work(
            id=str(body.get("id") or item.item_id),
            attempt=item.attempts,
            about=item.about,
            interaction=item.interaction,
        )
        kind = item.kind
        if not is_work_kind(kind):
            log.error("dropping work item %s of unknown kind %r", item.item_id, kind)
            return
        match kind:
            case "event":
                await self._work_event(body, work)
            case "action":
                await self.on_click(body["payload"], work)
            case "view":
                await self._on_modal_answer(body, work)
            case "stop":
                thread = Thread(channel=str(body["channel"]), thread_ts=str(body["thread_ts"]))
                claimed = body.get("run_id")
                await self.conversations.stop(
                    thread, user=str(body["user"]), claimed=str(claimed) if claimed else None
                )
            case "command":
                await self._on_command(body, work)
            case "recover":
                await self.answers.recover_run(str(body["run_id"]), work=work)
            case unreachable:
                assert_never(unreachable)

    async def _work_event(self, item: dict[str, Any], work: Work) -> None:
        body: dict[str, Any] = item["payload"]
        event: dict[str, Any] = body["event"]
        bot_user_id = item.get("bot_user_id")
        # Messages of one thread are handled in the order they arrived: a quick follow-up
        # continues from the run before it instead of racing it.
        key = (str(event["channel"]), str(event.get("thread_ts") or event["ts"]))
        before = self._thread_tails.get(key)
        me = asyncio.current_task()
        assert me is not None
        self._thread_tails[key] = me
        try:
            if before is not None and not before.done():
                await asyncio.wait([before])
            await self._on_message(
                body, event, bot_user_id, mention=bool(item.get("mention")), work=work
            )
        finally:
            if self._thread_tails.get(key) is me:
                del self._thread_tails[key]

    # The handlers below are where work ends: whatever still goes wrong (a bug, Slack refusing)
    # is logged in full and told to the person in one plain sentence, so a click or a message
    # never just vanishes. A store outage is not told: the work item stays in the inbox and is
    # finished once the store is back.

    async def on_click(self, body: dict[str, Any], work: Work | None) -> None:
        try:
            await self.answers.on_action(body, work=work)
        except StoreError:
            if work is None:
                await self.not_recorded(body)
                return
            raise
        except Exception:
            log.exception("could not handle a click")
            user, channel = user_and_channel(body)
            if user and channel:
                await self.chat.ephemeral(channel, user, SORRY)

    async def _on_modal_answer(self, item: dict[str, Any], work: Work) -> None:
        try:
            await self.answers.on_modal_answer(item, work=work)
        except StoreError:
            raise
        except Exception:
            log.exception("could not take the answer to %s", item.get("interaction_id"))
            record = await self.store.get_interaction(str(item["interaction_id"]))
            if record is not None and record.channel:
                user = str(item["user"])
                await self.chat.ephemeral(record.channel, user, SORRY, thread_ts=record.thread_ts)

    async def _on_command(self, item: dict[str, Any], work: Work) -> None:
        try:
            await self.commands.run(item, work)
        except StoreError:
            raise
        except Exception:
            log.exception("could not run a slash command")
            body = item["payload"]
            await self.chat.ephemeral(str(body["channel_id"]), str(body["user_id"]), SORRY)

    async def _on_message(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        bot_user_id: str | None,
        *,
        mention: bool,
        work: Work,
    ) -> None:
        try:
            await self._on_person_message(body, event, bot_user_id, mention=mention, work=work)
        except StoreError:
            raise
        except Exception:
            log.exception("could not handle event %s", body.get("event_id"))
            channel = str(event["channel"])
            await self.chat.post(
                channel, SORRY, thread_ts=str(event.get("thread_ts") or event["ts"])
            )

    async def _on_person_message(
        self,
        body: dict[str, Any],
        event: dict[str, Any],
        bot_user_id: str | None,
        *,
        mention: bool,
        work: Work,
    ) -> None:
        # Slack's redeliveries were dropped when the event was recorded (`dedupe=event_id`).
        channel = str(event["channel"])
        ts = str(event["ts"])
        in_thread = event.get("thread_ts")
        is_dm = event.get("channel_type") == "im"
        thread = Thread(
            channel=channel, thread_ts=str(in_thread or ts), requester=str(event.get("user"))
        )
        # A plain channel message only matters inside a thread the bot already talks in.
        if (
            not mention
            and not is_dm
            and (not in_thread or await self.store.get_thread_run(channel, str(in_thread)) is None)
        ):
            return
        text = _without_mention(str(event.get("text") or ""), bot_user_id)
        user = str(event["user"])
        if in_thread and (
            await self.answers.on_thread_reply(thread, user=user, text=text, work=work)
            or await self.answers.holds_thread(thread, user=user)
        ):
            return
        if not text:
            text = "Hello!"
        await self.conversations.start(
            thread, text=text, message_ts=ts, run_id=work.run_id("turn"), retry=work.retry
        )


def _without_mention(text: str, bot_user_id: str | None) -> str:
    if bot_user_id:
        text = mention_of(bot_user_id).sub("", text)
    return text.strip()


def mention_of(bot_user_id: str) -> re.Pattern[str]:
    """`<@U…>`, and the labelled `<@U…|name>` that some clients and API posts still send."""
    return re.compile(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>")


def is_work_kind(kind: str) -> TypeGuard[WorkKind]:
    """Whether this process knows what to do with an item of `kind` (a newer process in a
    rolling upgrade may enqueue a kind an older one does not know)."""
    return kind in WORK_KINDS
