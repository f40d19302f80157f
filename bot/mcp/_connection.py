"""One MCP server's connection, kept up: opened at start, restarted with backoff when it ends,
its tool list read again when the server says it changed, closed on shutdown.

The SDK's `Client` runs task groups that must be entered and left by one task, so a supervisor
task owns it; calls from runs' tasks go through the session it publishes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import httpx2
from mcp.client import Client, ClientRequestContext, IncomingMessage
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    ElicitCompleteNotification,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    Implementation,
    Tool,
    ToolListChangedNotification,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._live import Completions, OpenCall, serve_question
from ._open_calls import OpenCalls

__all__ = ["Backoff", "Connection", "Launch"]

log = logging.getLogger("handback.mcp")

_HEALTHY = 60.0
"""Seconds a connection must have lived for its end to restart the backoff from the start."""


@dataclass(kw_only=True, frozen=True)
class Launch:
    """How to reach the server, with `${ENV}` already read (so never shown: no repr)."""

    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    url: str = field(default="", repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)

    def transport(self, stack: AsyncExitStack) -> AbstractAsyncContextManager[Any]:
        if self.command:
            params = StdioServerParameters(
                command=self.command[0], args=list(self.command[1:]), env=self.env, cwd=self.cwd
            )
            return stdio_client(params)
        http = httpx2.AsyncClient(headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0))
        stack.push_async_callback(http.aclose)
        return streamable_http_client(self.url, http_client=http)


@dataclass(kw_only=True, frozen=True)
class Backoff:
    """Seconds between restarts: `first`, doubled after each failure, at most `most`."""

    first: float = 0.5
    most: float = 30.0


@dataclass(kw_only=True)
class Connection:
    """The supervisor of one server's session."""

    server: str
    launch: Launch
    backoff: Backoff
    on_tools: Callable[[list[Tool]], None]
    """Called with the server's full tool list on each connect and on each change."""
    hide: Callable[[str], str]
    """Masks the values read from the environment in a text that is about to be logged."""
    client: Client | None = None
    """The open session; None while the server is down."""
    _task: asyncio.Task[None] | None = None
    _up: asyncio.Event = field(default_factory=asyncio.Event)
    _tried: asyncio.Event = field(default_factory=asyncio.Event)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _refresh: bool = False
    _dead: bool = True
    """Whether the current session's stream has ended (or there is none)."""
    restarts: int = 0
    """How many times the server was started again after its connection ended."""
    completions: Completions = field(default_factory=Completions)
    """The URL questions the server said were completed (`notifications/elicitation/complete`)."""
    _calls: OpenCalls = field(default_factory=OpenCalls)
    """The calls open on the current session (a new session starts with none in doubt)."""

    async def start(self, *, wait: float) -> None:
        """Start the supervisor; return once the first connection succeeded or failed, or after
        `wait` seconds (a server that is slow to start is not waited for forever)."""
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"mcp-{self.server}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._tried.wait()

    async def stop(self, *, grace: float) -> None:
        """Close the session (a stdio server is told to exit, then killed); the supervisor is
        cancelled when it takes longer than `grace`."""
        self._stopping.set()
        self._wake.set()
        task, self._task = self._task, None
        if task is None:
            return
        try:
            async with asyncio.timeout(grace):
                await asyncio.shield(task)
        except TimeoutError:
            log.warning("MCP server %s did not close within %ss; cancelled", self.server, grace)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def session(self, *, wait: float) -> Client | None:
        """The open session, waiting up to `wait` seconds for a restart; None if still down."""
        if self._up.is_set() and not self._dead and self.client is not None:
            return self.client
        if self._task is None:
            return None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._up.wait()
        return self.client if not self._dead else None

    @property
    def dead(self) -> bool:
        return self._dead

    async def _supervise(self) -> None:
        loop = asyncio.get_running_loop()
        delay = self.backoff.first
        while not self._stopping.is_set():
            began = loop.time()
            try:
                await self._connected()
            except Exception as exc:
                log.warning("MCP server %s: %s", self.server, self.hide(_describe(exc)))
            finally:
                self._up.clear()
                self.client = None
                self._dead = True
                self._tried.set()
            if self._stopping.is_set():
                break
            if loop.time() - began > _HEALTHY:
                delay = self.backoff.first
            log.warning("MCP server %s is down; starting it again in %.1fs", self.server, delay)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
            delay = min(delay * 2, self.backoff.most)
            self.restarts += 1

    async def _connected(self) -> None:
        """One session, from connect to the end of its stream (or shutdown)."""
        ended = asyncio.Event()

        def end() -> None:
            self._dead = True
            self._up.clear()
            ended.set()
            self._wake.set()

        async with AsyncExitStack() as stack:
            transport = _watched(self.launch.transport(stack), end)
            client = Client(
                transport,
                message_handler=self._on_message,
                # Advertises elicitation, so servers ask: on the current protocol in an
                # input-required result (durable cards: `_elicit`), on the older one during
                # the call (cards answered while the call is open: `_live`).
                elicitation_callback=self._on_question,
                cache=None,
                client_info=Implementation(name="handback", version="0.1.0"),
            )
            await stack.enter_async_context(client)
            self._calls = OpenCalls()
            self._dead = False
            group = await stack.enter_async_context(anyio.create_task_group())
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                # Subscribed before the first list, so no change between the two is missed.
                await group.start(self._listen, client)
            tools = await _all_tools(client)
            self.on_tools(tools)
            self.client = client
            self._up.set()
            self._tried.set()
            log.info("MCP server %s connected: %d tools", self.server, len(tools))
            while not self._stopping.is_set() and not ended.is_set():
                await self._wake.wait()
                self._wake.clear()
                if self._refresh and not ended.is_set():
                    self._refresh = False
                    await self._list_again(client)
            group.cancel_scope.cancel()
            if ended.is_set() and not self._stopping.is_set():
                log.warning("MCP server %s: the connection ended", self.server)

    async def _list_again(self, client: Client) -> None:
        try:
            tools = await _all_tools(client)
        except Exception as exc:
            log.warning(
                "MCP server %s: could not list its tools again: %s",
                self.server,
                self.hide(_describe(exc)),
            )
            return
        self.on_tools(tools)
        log.info("MCP server %s: tool list changed: %d tools", self.server, len(tools))

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The current protocol's way to hear that the tool list changed: a subscription.
        Reports started once the server acknowledged it (or refused it)."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                async for _event in subscription:
                    self._refresh = True
                    self._wake.set()
        except Exception as exc:
            with contextlib.suppress(RuntimeError):  # already reported started
                task_status.started()
            log.info(
                "MCP server %s: no tool-list subscription: %s",
                self.server,
                self.hide(_describe(exc)),
            )

    def open_call(self, call: OpenCall) -> contextlib.AbstractContextManager[None]:
        """While a call is open, a question the server asks during it may be that call's."""
        return self._calls.opened(call)

    async def _on_question(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """A question sent during a call (the older protocol's `elicitation/create`). The
        protocol does not say which call asks (over stdio nothing ties the request to one), so
        it is served only for a call that had the session alone from start to finish
        (`OpenCalls`); otherwise it is refused (fails closed: it could reach the wrong person)."""
        call = self._calls.owner()
        if call is None:
            log.warning(
                "MCP server %s asked a question during a call while %d calls were open (or "
                "had been, or one had been stopped); refused: it cannot be told whose it is",
                self.server,
                len(self._calls),
            )
            return ErrorData(
                code=INVALID_REQUEST,
                message="handback cannot tell which of its open calls this question is for",
            )
        return await serve_question(call, params, self.completions)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completions.complete(message.params.elicitation_id)
        elif isinstance(message, ToolListChangedNotification):
            self._refresh = True
            self._wake.set()
        elif isinstance(message, Exception):
            log.debug("MCP server %s: %s", self.server, self.hide(_describe(message)))


async def _all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends must not hang the start
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


@asynccontextmanager
async def _watched(
    inner: AbstractAsyncContextManager[Any], ended: Callable[[], None]
) -> AsyncIterator[Any]:
    """`inner`'s streams, with `ended()` called once its read stream ends: how a stdio server
    that died is seen while no call is open, so it can be restarted before the next call."""
    async with inner as (read, write):
        relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with relay_in:
                    async for item in read:
                        await relay_in.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                ended()

        async with anyio.create_task_group() as group:
            group.start_soon(relay)
            try:
                yield relay_out, write
            finally:
                group.cancel_scope.cancel()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
