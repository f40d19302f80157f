"""How the runtime talks to a model: Chat Completions with tool calls, via the `openai` SDK."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._errors import UsageError
from ._redact import mask_text

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = [
    "Model",
    "ModelResponse",
    "OpenAIModel",
    "ToolCall",
    "describe_failure",
    "from_sdk",
    "resolve_model",
]


@dataclass(kw_only=True, frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """JSON text, exactly as the model produced it."""


@dataclass(kw_only=True)
class ModelResponse:
    """One assistant turn: text, tool calls, or both."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the transcript."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


@runtime_checkable
class Model(Protocol):
    name: str

    def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        """Yield text deltas (when streaming), then exactly one `ModelResponse`."""
        ...


class OpenAIModel:
    """Any OpenAI-compatible Chat Completions server; the SDK reads OPENAI_API_KEY/BASE_URL."""

    def __init__(self, name: str, client: AsyncOpenAI | None = None) -> None:
        self.name = name
        self._client = client
        self._per_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[AsyncOpenAI, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()

    @property
    def own_client(self) -> bool:
        """Whether the client is made here from the environment (OPENAI_API_KEY,
        OPENAI_BASE_URL), not given (an `AsyncAzureOpenAI`, say)."""
        return self._client is None

    @property
    def base_url(self) -> str | None:
        """Where a given client sends its calls; None for the environment's."""
        return None if self._client is None else str(self._client.base_url)

    async def client(self) -> AsyncOpenAI:
        """The given client, else one per event loop: an HTTP client's connections belong to
        the loop that opened them, and a module-level agent may outlive several loops.

        A client made here is closed when its loop shuts down (`asyncio.run` and
        `asyncio.Runner` close every open async generator of the loop first, and one holds the
        client) or by `aclose()` on that loop, whichever comes first.
        """
        if self._client is not None:
            return self._client
        loop = asyncio.get_running_loop()
        made = self._per_loop.get(loop)
        if made is None:
            # Imported and built on first use so that agents on a FunctionModel never need a key.
            from openai import AsyncOpenAI

            client = AsyncOpenAI()
            closer = _closed_at_shutdown(client)
            made = self._per_loop[loop] = (client, closer)
            await anext(closer)  # iterated once, so the loop keeps it until it shuts down
        return made[0]

    async def aclose(self) -> None:
        """Close the client made for the running loop now; a client given is the caller's."""
        made = self._per_loop.pop(asyncio.get_running_loop(), None)
        if made is not None:
            await made[1].aclose()

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        extra: dict[str, Any] = {"tools": tools} if tools else {}
        # The SDK's TypedDict overloads add nothing here: messages are plain dicts by design.
        create: Any = (await self.client()).chat.completions.create
        if not stream:
            completion = await create(
                model=self.name,
                messages=messages,
                **extra,
            )
            choice = completion.choices[0].message
            calls = [
                ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
                for c in (choice.tool_calls or [])
                if c.type == "function"
            ]
            yield ModelResponse(
                text=choice.content or "", tool_calls=calls, usage=_usage(completion.usage)
            )
            return
        chunks = await create(
            model=self.name,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            **extra,
        )
        text: list[str] = []
        partial: dict[int, dict[str, str]] = {}
        last: int | None = None
        usage: dict[str, int] = {}
        async for chunk in chunks:
            if chunk.usage is not None:
                usage = _usage(chunk.usage)
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            if delta.content:
                text.append(delta.content)
                yield delta.content
            for call in delta.tool_calls or []:
                index: int | None = call.index
                if index is None:
                    # Some servers (Gemini's) send no index: a new id starts the next call, and
                    # a delta without one continues the call before it.
                    new_call = last is None or (call.id and call.id != partial[last]["id"])
                    index = max(partial, default=-1) + 1 if new_call else last
                assert index is not None
                last = index
                slot = partial.setdefault(index, {"id": "", "name": "", "arguments": ""})
                if call.id:
                    slot["id"] = call.id
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
        yield ModelResponse(
            text="".join(text),
            tool_calls=[ToolCall(**partial[index]) for index in sorted(partial)],
            usage=usage,
        )


async def _closed_at_shutdown(client: AsyncOpenAI) -> AsyncGenerator[None, None]:
    """Waits at its `yield` for the life of the loop, then closes `client` on it."""
    try:
        yield
    finally:
        await client.close()


def _usage(usage: Any) -> dict[str, int]:
    if usage is None:
        return {}
    return {
        "prompt_tokens": int(usage.prompt_tokens or 0),
        "completion_tokens": int(usage.completion_tokens or 0),
        "total_tokens": int(usage.total_tokens or 0),
    }


def from_sdk(error: BaseException) -> bool:
    """Whether the `openai` SDK raised `error` (the server refused, was out of reach, no key):
    its words say what to fix. Anything else is a fault in a model's own code, whose message
    may hold whatever it holds (paths, data) and belongs in the log only."""
    return type(error).__module__.split(".")[0] == "openai"


def describe_failure(name: str, error: BaseException, limit: int = 300) -> str:
    """Why a call to model `name` failed (`error` is the SDK's), in one line that may be shown
    to people: the kind, the HTTP status and the server's own message (not the SDK's repr of
    the whole body), secret-looking parts masked and control characters dropped, since the
    server's text is not ours."""
    kind = type(error).__name__
    status = getattr(error, "status_code", None)
    body = getattr(error, "body", None)
    said: object = None
    if isinstance(body, dict):
        inner = body.get("error")
        said = inner.get("message") if isinstance(inner, dict) else body.get("message")
    if not isinstance(said, str) or not said:
        said = str(error) or "no message"
    kind += f" (HTTP {status})" if isinstance(status, int) else ""
    text = f"the model call to `{name}` failed: {kind}: {said}"
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    text = mask_text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def resolve_model(model: str | Model) -> Model:
    if isinstance(model, str):
        provider, sep, name = model.partition("/")
        if not sep or provider != "openai" or not name:
            raise UsageError(
                f"model {model!r} is not supported: use 'openai/<model-name>' "
                "(any OpenAI-compatible server via OPENAI_BASE_URL) or a bot.testing.FunctionModel"
            )
        return OpenAIModel(name)
    if isinstance(model, Model):
        return model
    raise UsageError(f"model must be 'openai/<name>' or a Model, got {model!r}")
