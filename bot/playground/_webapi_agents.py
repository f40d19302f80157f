"""The Web API's methods for apps declared as agents: a thread's agent session
(`agents.sessions.setStatus`, `.rename`) and the messages streamed into it (`chat.startStream`,
`appendStream`, `stopStream`), whose chunks slack_sdk's own chunk models check.

`WebApi` answers all of them with `workspace.agent_refusal` when it is set, as Slack answers an
app not declared as an agent (`AGENT_METHODS`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk.models.messages.chunk import (
    BlocksChunk,
    Chunk,
    MarkdownTextChunk,
    PlanUpdateChunk,
    TaskUpdateChunk,
)

from ._limits import check_message, limit
from ._webapi_args import (
    Handler,
    _ApiError,
    channel_arg,
    json_arg,
    message_arg,
    postable,
    text_and_blocks,
    thread_ts,
)
from ._workspace_model import AgentSession, Message, SessionStatus, Workspace

__all__ = ["AGENT_METHODS", "AGENT_METHOD_HANDLERS"]

_SESSION_STATUSES: frozenset[str] = frozenset({"processing", "active", "suspended", "closed"})
_TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
_MARKDOWN_LIMIT = limit("markdown_text").figure


async def _set_status(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    status = str(args.get("status") or "")
    if status not in _SESSION_STATUSES:
        raise _ApiError("invalid_status")
    session = _session(ws, args, status)  # type: ignore[arg-type]
    if args.get("title"):
        session.title = str(args["title"])
    if args.get("initiator_user_id"):
        initiator = str(args["initiator_user_id"])
        if initiator not in ws.users:
            raise _ApiError("user_not_found")
        session.initiator_user_id = initiator
    await _session_changed(ws, session)
    return {"status": session.status, "title": session.title}


async def _rename(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    key = (channel_arg(ws, args, "channel_id"), str(args.get("thread_ts") or ""))
    session = ws.sessions.get(key)
    if session is None:
        raise _ApiError("session_not_found")
    title = str(args.get("title") or "")
    if not title:
        raise _ApiError("invalid_arguments")
    session.title = title
    await _session_changed(ws, session)
    return {"title": title}


def _session(ws: Workspace, args: Mapping[str, Any], status: SessionStatus) -> AgentSession:
    """The session of the thread `args` name, created if new, moved to `status`."""
    channel = channel_arg(ws, args, "channel_id")
    thread = str(args.get("thread_ts") or "")
    if ws.message(channel, thread) is None:
        # docs.slack.dev/reference/methods/assistant.threads.setStatus (the method
        # agents.sessions.setStatus follows) answers a thread it cannot find this way.
        raise _ApiError("invalid_thread_ts")
    session = ws.sessions.get((channel, thread))
    if session is None:
        session = AgentSession(channel=channel, thread_ts=thread, status=status)
        ws.sessions[(channel, thread)] = session
    session.status = status
    session.history.append(status)
    return session


async def _session_changed(ws: Workspace, session: AgentSession) -> None:
    await ws.publish(
        "status",
        {
            "channel": session.channel,
            "thread_ts": session.thread_ts,
            "status": session.status,
            "title": session.title,
        },
    )


async def _start_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    channel = postable(ws, args)
    thread = thread_ts(args)
    if thread is None or ws.message(channel, thread) is None:
        # thread_ts is required (docs.slack.dev/reference/methods/chat.startStream: "Streamed
        # messages should always be replies"); the error name follows the session methods'
        # (unconfirmed for this method: its page's error table was not at hand).
        raise _ApiError("invalid_thread_ts")
    if not ws.channels[channel].is_im:
        # Outside a DM Slack must know who the stream is for.
        if not args.get("recipient_user_id"):
            raise _ApiError("missing_recipient_user_id")
        if not args.get("recipient_team_id"):
            raise _ApiError("missing_recipient_team_id")
        if str(args["recipient_user_id"]) not in ws.users:
            raise _ApiError("user_not_found")
        if str(args["recipient_team_id"]) != ws.team_id:
            raise _ApiError("team_not_found")
    if args.get("task_display_mode") not in {None, "timeline", "plan"}:
        raise _ApiError("invalid_arguments")
    chunks = _streamed_chunks(args)
    message = Message(
        channel=channel,
        ts=ws.new_ts(),
        bot_id=ws.bot_id,
        user=ws.bot_user_id,
        thread_ts=thread,
        streaming=True,
    )
    _append(message, chunks)
    ws.messages.append(message)
    await ws.publish("message", {"channel": channel, **message.to_api()})
    return {"channel": channel, "ts": message.ts}


async def _append_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = _streaming(ws, args)
    chunks = _streamed_chunks(args)
    if not chunks:
        raise _ApiError("no_text")
    _append(message, chunks)
    await _message_changed(ws, message)
    return {"channel": message.channel, "ts": message.ts}


async def _stop_stream(ws: Workspace, args: dict[str, Any]) -> dict[str, Any]:
    message = _streaming(ws, args)
    _append(message, _streamed_chunks(args))
    if "blocks" in args:
        _, message.blocks = text_and_blocks({"blocks": args["blocks"], "text": "-"})
        check_message(message.blocks)
    message.streaming = False
    status = args.get("session_status")
    if status is not None:
        if status not in _SESSION_STATUSES:
            raise _ApiError("invalid_status")
        where = {"channel_id": message.channel, "thread_ts": message.thread_ts}
        await _session_changed(ws, _session(ws, where, status))
    await _message_changed(ws, message)
    return {"channel": message.channel, "ts": message.ts, "message": message.to_api()}


def _streaming(ws: Workspace, args: Mapping[str, Any]) -> Message:
    message = message_arg(ws, args, "ts")
    if message.bot_id != ws.bot_id:
        raise _ApiError("message_not_owned_by_app")
    if message.stopped_by_user:
        raise _ApiError("stopped_by_user")
    if not message.streaming:
        raise _ApiError("message_not_in_streaming_state")
    return message


async def _message_changed(ws: Workspace, message: Message) -> None:
    await ws.publish("message_updated", {"channel": message.channel, **message.to_api()})


def _streamed_chunks(args: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`markdown_text` and `chunks` of a stream call as chunks, each checked by slack_sdk's model
    of its type; anything else is `invalid_chunks`, as Slack answers."""
    chunks: list[dict[str, Any]] = []
    markdown = args.get("markdown_text")
    if markdown is not None:
        chunks.append({"type": "markdown_text", "text": markdown})
    given = json_arg(args, "chunks")
    if given is not None:
        if not isinstance(given, list):
            raise _ApiError("invalid_chunks")
        chunks += given
    return [_checked_chunk(chunk) for chunk in chunks]


_CHUNK_MODELS: dict[str, type[Chunk]] = {
    model.type: model
    for model in (MarkdownTextChunk, TaskUpdateChunk, PlanUpdateChunk, BlocksChunk)
}


def _checked_chunk(chunk: Any) -> dict[str, Any]:
    if not isinstance(chunk, dict) or chunk.get("type") not in _CHUNK_MODELS:
        raise _ApiError("invalid_chunks")
    fields = {k: v for k, v in chunk.items() if k != "type"}
    try:
        model = _CHUNK_MODELS[chunk["type"]](**fields)
    except TypeError:
        raise _ApiError("invalid_chunks") from None
    attributes = model.attributes if isinstance(model.attributes, set) else set()
    if set(fields) - attributes:
        raise _ApiError("invalid_chunks")  # a field the model does not know
    if isinstance(model, MarkdownTextChunk) and (
        not isinstance(model.text, str) or len(model.text) > _MARKDOWN_LIMIT
    ):
        raise _ApiError("invalid_chunks")
    if isinstance(model, TaskUpdateChunk) and (
        model.status not in _TASK_STATUSES or not model.id or not model.title
    ):
        raise _ApiError("invalid_chunks")
    return model.to_dict()


def _append(message: Message, chunks: list[dict[str, Any]]) -> None:
    message.chunks += chunks
    message.text += "".join(str(c["text"]) for c in chunks if c["type"] == "markdown_text")


AGENT_METHOD_HANDLERS: dict[str, Handler] = {
    "agents.sessions.setStatus": _set_status,
    "agents.sessions.rename": _rename,
    "chat.startStream": _start_stream,
    "chat.appendStream": _append_stream,
    "chat.stopStream": _stop_stream,
}
"""Each method's handler, by the method's name."""

AGENT_METHODS = frozenset(AGENT_METHOD_HANDLERS)
"""The methods only an app declared as an agent (`features.agent_view`) may call."""
