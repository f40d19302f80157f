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
from typing import Any, Literal, TypeVar, get_type_hints

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

__all__ = ["ApprovalRule", "PrimedCall", "Tool", "as_tool", "json_object", "mark_pure"]

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
        blocking tool never stalls the event loop (see `_HandlerThread`)."""
        if self.is_async:
            return await self.handler(**arguments)
        if self.pure:
            value = self.handler(**arguments)
        else:
            thread = _HandlerThread(
                self.handler, arguments, name=self._thread_name, context=contextvars.copy_context()
            )
            value = await thread.go()
        return await _awaited(value)

    def prime(self, arguments: dict[str, Any], context: contextvars.Context) -> PrimedCall:
        """The call made ready to begin in `context`, without calling the handler yet: the
        journal primes each call before it writes the "started" mark and begins it right after
        (`PrimedCall`)."""
        return PrimedCall(self, arguments, context)

    def start(self, arguments: dict[str, Any], context: contextvars.Context) -> asyncio.Task[Any]:
        """Begin the call in `context` now and return it as a task (`PrimedCall.begin`)."""
        return self.prime(arguments, context).begin()

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


class PrimedCall:
    """One call of a tool, ready to begin: `begin()` starts it, `drop()` lets it go unstarted.

    The journal's "started" mark is written between the two (`bot._step`), so a call marked
    started should have begun, and what lies between the mark's commit and the handler's first
    statement is a window in which a kill leaves a call reported interrupted that never ran.
    For a sync handler the thread is started here, before the mark, and waits; `begin()` only
    wakes it. An async (or pure) handler has nothing to prepare: `begin()` runs it up to its
    first await (`eager_task`), on the caller's stack.
    """

    def __init__(self, tool: Tool, arguments: dict[str, Any], context: contextvars.Context) -> None:
        self._tool = tool
        self._arguments = arguments
        self._context = context
        self._state: Literal["primed", "begun", "dropped"] = "primed"
        self._thread: _HandlerThread | None = None
        if not (tool.is_async or tool.pure):
            # A copy for the thread: a context is entered by one thread at a time, and the
            # task that awaits the thread enters `context` on each of its turns.
            self._thread = _HandlerThread(
                tool.handler, arguments, name=tool._thread_name, context=context.copy()
            )

    def begin(self) -> asyncio.Task[Any]:
        """Call the handler now; the task settles with what it returns (or raises)."""
        if self._state != "primed":
            raise RuntimeError(f"the call of tool `{self._tool.name}` was {self._state} already")
        self._state = "begun"
        if self._thread is None:
            return eager_task(self._tool.invoke(self._arguments), self._context)
        done = self._thread.go()
        task = asyncio.get_running_loop().create_task(_returned(done), context=self._context)
        # A task cancelled before its first turn never awaits the thread's future: drop it.
        task.add_done_callback(lambda _: done.cancel())
        return task

    def drop(self) -> None:
        """Never call the handler (the mark was not written): its waiting thread ends. Nothing
        happens to a call that has begun."""
        if self._state == "primed":
            self._state = "dropped"
            if self._thread is not None:
                self._thread.drop()


_HAND_OFF = 0.05
"""Seconds `_HandlerThread.go` waits, at most, for the woken thread to call the handler."""


class _HandlerThread:
    """`handler(**arguments)` in a daemon thread of its own, started at once, calling the
    handler when `go()` is called (or ending without calling it at `drop()`), in `context` (a
    copy of the caller's, as `asyncio.to_thread` makes, so `suspend()` and `current_call()`
    work there); the future `go()` returns settles on the loop with what it returned.

    Not `asyncio.to_thread`: the threads of its pool, like those of every `ThreadPoolExecutor`,
    are joined when the process exits, so one tool that blocks would hold a process that was
    told to stop (SIGTERM) past its grace period. A daemon thread is not waited for; the run it
    belonged to was saved as interrupted when its task was cancelled, and what the thread
    returns after that is dropped.
    """

    def __init__(
        self,
        handler: Callable[..., Any],
        arguments: dict[str, Any],
        *,
        name: str,
        context: contextvars.Context,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future[Any] = self._loop.create_future()
        self._handler = handler
        self._arguments = arguments
        self._context = context
        self._go = False
        self._woken = threading.Event()
        self._began = threading.Event()
        threading.Thread(target=self._work, name=name, daemon=True).start()

    def go(self) -> asyncio.Future[Any]:
        """Wake the thread to call the handler, and wait (`_HAND_OFF` at most) until it has
        taken over: woken, it still needs the interpreter lock, which this thread would
        otherwise hold on through the loop's next callbacks for up to a switch interval
        (5 ms); waiting hands it over at once. A wait that runs out (a machine so busy that
        the thread is not scheduled) leaves the thread to start on its own."""
        self._go = True
        self._woken.set()
        self._began.wait(_HAND_OFF)
        return self._done

    def drop(self) -> None:
        self._woken.set()

    def _work(self) -> None:
        self._woken.wait()
        if not self._go:
            return
        self._began.set()
        try:
            value = self._context.run(self._handler, **self._arguments)
        except BaseException as exc:  # the pause (`Suspended`) is a BaseException too
            report = partial(self._settle, partial(self._done.set_exception, exc))
        else:
            report = partial(self._settle, partial(self._done.set_result, value))
        with contextlib.suppress(RuntimeError):  # the loop is closed: the process is stopping
            self._loop.call_soon_threadsafe(report)

    def _settle(self, outcome: Callable[[], None]) -> None:
        if not self._done.done():  # cancelled: nobody waits for it any more
            outcome()


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
