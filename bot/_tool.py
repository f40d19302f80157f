"""`Tool`: a handler the model may call, with a JSON Schema and validated arguments."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import re
import threading
import warnings
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    PydanticSchemaGenerationError,
    TypeAdapter,
    ValidationError,
    create_model,
)

from state import Approval

from ._eager import eager_task
from ._errors import ApprovalPolicyError, HandbackError, UsageError

__all__ = ["ApprovalRule", "Tool", "as_tool", "json_object", "mark_pure"]

log = logging.getLogger("handback")

ApprovalRule = (
    bool | Approval | Callable[..., bool | Approval | Awaitable[bool] | Awaitable[Approval]]
)
"""`True` is `Approval()`; a callable over the tool's arguments decides per call."""

_F = TypeVar("_F", bound=Callable[..., Any])
_PURE = "__handback_pure__"


def mark_pure(handler: _F) -> _F:
    """Mark a handler as pure wherever it is wrapped: `Tool(handler)` defaults to `pure=True`."""
    setattr(handler, _PURE, True)
    return handler


# What the Chat Completions API accepts as a function name; `str.isalnum` would let `é` through.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What Slack accepts as a slash command: a slash, then at most 31 lowercase letters, digits, - or _.
_COMMAND = re.compile(r"/[a-z0-9_-]{1,31}")


class ArgumentsError(HandbackError, ValueError):
    """The model sent arguments the tool cannot take; the message goes back to the model."""


def json_object(raw: str) -> dict[str, Any]:
    """The model's arguments string read as a JSON object (empty means `{}`), or
    `ArgumentsError`: the reading every tool shares before it checks the arguments its way."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ArgumentsError(f"arguments are not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ArgumentsError("arguments must be a JSON object")
    return data


class Tool:
    """A handler (sync or async) exposed to the model as a function tool.

    `idempotent=True` says running the handler twice for the same call does no harm (it reads,
    or it passes `current_call().idempotency_key` to an API that deduplicates): a call that was
    running when its process died is run again instead of reported as interrupted.

    `pure=True` says the handler has no side effect at all beyond `suspend()` and never blocks
    (like the ready tools in `bot.tools`): the runtime saves no journal entry around it and
    calls it on the event loop even when it is sync. Other sync handlers run in a worker thread.

    `command="/deploy"` lets people run the tool directly as a Slack slash command
    (`/deploy api 2.3 prod`), through the same approval gate (`Agent.call_tool`).
    """

    channel_rule: bool = False
    """True on the copy a channel's own rule made (`bot/_channel_rules.py`): its card says the
    rule is the channel's."""

    def __init__(
        self,
        handler: Callable[..., Any],
        name: str | None = None,
        description: str | None = None,
        requires_approval: ApprovalRule = False,
        *,
        idempotent: bool = False,
        pure: bool | None = None,
        redact: Sequence[str] = (),
        command: str | None = None,
    ) -> None:
        if not callable(handler):
            raise UsageError(f"Tool handler must be callable, got {handler!r}")
        self.handler = handler
        self.name: str = name or str(getattr(handler, "__name__", ""))
        if not _TOOL_NAME.fullmatch(self.name):
            raise UsageError(
                f"Tool name {self.name!r} must be 1-64 ASCII letters, digits, `_` or `-`"
            )
        if inspect.isasyncgenfunction(handler) or inspect.isgeneratorfunction(handler):
            # Called, it would hand the model `<async_generator object ...>` as its result.
            raise UsageError(
                f"Tool `{self.name}` is a generator: a tool returns its result once (return "
                "the items as a list, or the text)"
            )
        self.description = description or inspect.getdoc(handler) or ""
        if not self.description:
            log.warning(
                "tool `%s` has no docstring or description: the model sees only its name",
                self.name,
            )
        if not isinstance(requires_approval, bool | Approval) and not callable(requires_approval):
            raise UsageError(
                f"Tool `{self.name}`: requires_approval must be a bool, an Approval or a "
                f"callable over the tool's arguments, got {requires_approval!r}"
            )
        self.requires_approval = requires_approval
        self.is_async = inspect.iscoroutinefunction(handler)
        if isinstance(redact, str) or not all(isinstance(k, str) and k for k in redact):
            raise UsageError(
                f"Tool `{self.name}`: redact must be a list of argument names, got {redact!r}"
            )
        self.redact = frozenset(k.lower() for k in redact)
        """Argument keys (at any depth) whose values an approval card never shows, on top of
        the names that look secret (`password`, `token`, ...)."""
        if command is not None and not (isinstance(command, str) and _COMMAND.fullmatch(command)):
            raise UsageError(
                f"Tool `{self.name}`: command must be `/` and 1-31 lowercase letters, digits, "
                f"`-` or `_` (as Slack takes it), got {command!r}"
            )
        self.command = command
        self.idempotent = bool(idempotent)
        self.pure = bool(getattr(handler, _PURE, False) if pure is None else pure)
        self._arguments = _arguments_model(handler, self.name)
        self.parameters = self._arguments.model_json_schema()
        self.parameters.pop("title", None)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def spec(self) -> dict[str, Any]:
        """The Chat Completions `tools` entry."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}

    async def invoke(self, arguments: dict[str, Any]) -> Any:
        """Call the handler; a sync handler that is not pure runs in a thread of its own, so a
        blocking tool never stalls the event loop (see `_start_thread`)."""
        if self.is_async:
            return await self.handler(**arguments)
        if self.pure:
            value = self.handler(**arguments)
        else:
            value = await _start_thread(
                self.handler, arguments, name=self._thread_name, context=contextvars.copy_context()
            )
        return await _awaited(value)

    def start(self, arguments: dict[str, Any], context: contextvars.Context) -> asyncio.Task[Any]:
        """Begin the call in `context` now and return it as a task.

        A sync handler's thread is running when this returns: the journal marks a call
        "started" just before, and nothing that waits for the event loop may come between
        (on a busy loop one turn can take longer than the store's round trip). An async or
        pure handler runs up to its first await before this returns (`eager_task`), for the
        same reason.
        """
        if self.is_async or self.pure:
            return eager_task(self.invoke(arguments), context)
        loop = asyncio.get_running_loop()
        # A copy for the thread: a context is entered by one thread at a time, and the task
        # that awaits the thread enters `context` on each of its turns.
        thread = _start_thread(
            self.handler, arguments, name=self._thread_name, context=context.copy()
        )
        task = loop.create_task(_returned(thread), context=context)
        # A task cancelled before its first turn never awaits the thread's future: drop it.
        task.add_done_callback(lambda _: thread.cancel())
        return task

    @property
    def _thread_name(self) -> str:
        return f"handback-tool-{self.name}"

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """Validated keyword arguments from the model's JSON string, or `ArgumentsError`."""
        data = json_object(raw)
        try:
            model = self._arguments.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"`{'.'.join(str(p) for p in err['loc']) or 'arguments'}`: {err['msg']}"
                for err in exc.errors()
            )
            raise ArgumentsError(problems) from None
        return {name: getattr(model, name) for name in type(model).model_fields}

    def approval_context(self) -> dict[str, str]:
        """What an approval card says of the tool besides its name: for an MCP tool its server
        and why it is gated (`bot.mcp`); nothing for a Python tool."""
        return {}

    async def approval_for(self, arguments: dict[str, Any]) -> Approval | None:
        """The rule this call must be approved under; None when it needs no approval. A policy
        that does not say so plainly fails.

        A sync policy is called on the event loop, not in a worker thread: policies are cheap
        checks of the arguments, and one that blocks is a bug in the policy. A policy answers
        with a real `bool` or an `Approval` (an `async def` policy is awaited). Anything else,
        `None` from a forgotten `return`, `[]`, `"no"`, `1`, or an exception, raises
        `ApprovalPolicyError`: reading it as truthy or falsy could run the tool unapproved.
        """
        rule = self.requires_approval
        if isinstance(rule, bool | Approval):
            return _as_rule(rule)
        try:
            decision: object = rule(**arguments)
            if inspect.isawaitable(decision):
                decision = await decision
        except Exception as exc:
            raise ApprovalPolicyError(
                f"The approval policy of tool `{self.name}` raised {type(exc).__name__}: {exc}",
                tool=self.name,
            ) from exc
        if not isinstance(decision, bool | Approval):
            raise ApprovalPolicyError(
                f"The approval policy of tool `{self.name}` must return True, False or an "
                f"Approval, got {decision!r}",
                tool=self.name,
            )
        return _as_rule(decision)


def _as_rule(decision: bool | Approval) -> Approval | None:
    if isinstance(decision, Approval):
        return decision
    return Approval() if decision else None


def _start_thread(
    handler: Callable[..., Any],
    arguments: dict[str, Any],
    *,
    name: str,
    context: contextvars.Context,
) -> asyncio.Future[Any]:
    """`handler(**arguments)` in a new daemon thread, already running when this returns, in
    `context` (a copy of the caller's, as `asyncio.to_thread` makes, so `suspend()` and
    `current_call()` work there); the future settles on the loop with what it returned.

    Not `asyncio.to_thread`: the threads of its pool, like those of every `ThreadPoolExecutor`,
    are joined when the process exits, so one tool that blocks would hold a process that was
    told to stop (SIGTERM) past its grace period. A daemon thread is not waited for; the run it
    belonged to was saved as interrupted when its task was cancelled, and what the thread
    returns after that is dropped.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():  # cancelled: nobody waits for it any more
            outcome()

    def work() -> None:
        try:
            value = context.run(handler, **arguments)
        except BaseException as exc:  # the pause (`Suspended`) is a BaseException too
            report = partial(settle, partial(done.set_exception, exc))
        else:
            report = partial(settle, partial(done.set_result, value))
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process is stopping
            loop.call_soon_threadsafe(report)

    threading.Thread(target=work, name=name, daemon=True).start()
    return done


async def _awaited(value: Any) -> Any:
    """`value`, awaited if it is awaitable: a sync function may still return one (a
    functools.partial of a coroutine function, a lambda returning one), awaited on the loop."""
    return await value if inspect.isawaitable(value) else value


async def _returned(thread: asyncio.Future[Any]) -> Any:
    """What a sync handler running in `thread` returned, awaited if it is awaitable."""
    return await _awaited(await thread)


def _arguments_model(handler: Callable[..., Any], name: str) -> type[BaseModel]:
    try:
        signature = inspect.signature(handler)
        hints = get_type_hints(handler, include_extras=True)
    except (TypeError, ValueError, NameError) as exc:
        raise UsageError(f"Cannot read the signature of tool `{name}`: {exc}") from exc
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UsageError(f"Tool `{name}` cannot take *args or **kwargs (`{param.name}`)")
        if param.kind is param.POSITIONAL_ONLY:
            # The handler is called with keyword arguments, the only shape the model sends.
            raise UsageError(f"Tool `{name}` cannot take positional-only `{param.name}`")
        if param.name.startswith("_"):
            # pydantic drops such fields from the schema, so the model could never send them.
            raise UsageError(f"Tool `{name}` parameter `{param.name}` must not start with `_`")
        if param.name not in hints:
            raise UsageError(
                f"Tool `{name}` parameter `{param.name}` has no type hint: the model is told "
                "each argument's type (`str`, `int`, a Literal, a pydantic model, ...)"
            )
        annotation = hints[param.name]
        try:
            TypeAdapter(annotation).json_schema()
        except (PydanticSchemaGenerationError, TypeError) as exc:
            raise UsageError(
                f"Tool `{name}` parameter `{param.name}` has a type the model cannot be told "
                f"in JSON Schema: {annotation!r} ({type(exc).__name__})"
            ) from None
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    with warnings.catch_warnings():
        # A parameter named `json` or `copy` is fine here: nobody calls BaseModel methods on it.
        warnings.filterwarnings("ignore", message=".*shadows an attribute", category=UserWarning)
        return create_model(f"{name}_arguments", __config__=config, **fields)


def as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else Tool(item)
