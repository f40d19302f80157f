"""`MCPServer`: an MCP server (stdio or streamable HTTP) as a toolset of an `Agent`."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    InputRequiredResult,
    InputResponses,
)
from mcp_types import Tool as ServerTool

from state import Approval

from .._errors import UsageError
from .._suspend import current_scope
from .._tool import ApprovalRule
from .._toolset import Toolset
from ._connection import Backoff, Connection, Launch
from ._elicit import Unanswerable, held_of, responses
from ._env import expand, names_in
from ._gate import gate_of, matches
from ._live import OpenCall, live_questions, refused_links, refused_note
from ._result import result_text
from ._tool import MCPTool

__all__ = ["MCPServer"]

log = logging.getLogger("handback.mcp")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_-]")
_ROUNDS = 10
"""Rounds of input one call may take (the SDK's default cap too)."""


class MCPServer(Toolset):
    """An MCP server whose tools the agent offers as `<prefix>_<tool>` (the prefix is the
    server's name unless `prefix=` says otherwise; `prefix=""` offers the names as they are).

    Every tool is gated (`approval=`, `Approval()` by default) unless `approvals={tool: rule}`
    names it (a name or a glob; `False` runs it unapproved), or `trust_annotations=True` and
    the server marks it `readOnlyHint`. `tools=[...]` (names or globs) keeps only those tools;
    `idempotent=[...]` names tools whose call may run again after a crash. Make one with
    `MCPServer.stdio(...)` or `MCPServer.http(...)`.
    """

    def __init__(
        self,
        name: str,
        *,
        command: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        prefix: str | None = None,
        tools: Sequence[str] | None = None,
        trust_annotations: bool = False,
        approvals: Mapping[str, ApprovalRule] | None = None,
        approval: ApprovalRule = True,
        redact: Sequence[str] = (),
        idempotent: Sequence[str] = (),
        timeout: float | None = None,
        start_timeout: float = 60.0,
        connect_timeout: float = 10.0,
        close_timeout: float = 5.0,
        backoff: Backoff | None = None,
        request_state_ttl: float | None = None,
        answerers: Sequence[str] = (),
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UsageError(
                f"MCP server name must be 1-40 ASCII letters, digits, `_` or `-`, got {name!r}"
            )
        self.name = name
        if bool(command) == bool(url):
            raise UsageError(f"MCP server `{name}` needs either a command or a url")
        if isinstance(command, str) or not all(isinstance(c, str) and c for c in command):
            raise UsageError(f"MCP server `{name}`: command must be a list of str, got {command!r}")
        self._command = tuple(command)
        self._env = dict(env or {})
        self._cwd = cwd
        self._url = url or ""
        self._headers = dict(headers or {})
        self.prefix = name if prefix is None else prefix
        if self.prefix and not _NAME.fullmatch(self.prefix):
            raise UsageError(f"MCP server `{name}`: prefix {self.prefix!r} is not a valid name")
        self.allowed = None if tools is None else _names(name, "tools", tools)
        self.trust_annotations = bool(trust_annotations)
        self.approvals = dict(approvals or {})
        for key, rule in self.approvals.items():
            _check_rule(name, f"approvals[{key!r}]", rule)
        if approval is False:
            raise UsageError(
                f"MCP server `{name}`: approval=False would run every tool unapproved; "
                "name the tools that need none in approvals={tool: False}"
            )
        _check_rule(name, "approval", approval)
        self.approval = approval
        if isinstance(redact, str) or not all(isinstance(k, str) and k for k in redact):
            raise UsageError(f"MCP server `{name}`: redact must be a list of names")
        self.redact = frozenset(k.lower() for k in redact)
        self.idempotent = _names(name, "idempotent", idempotent)
        self.timeout = timeout
        self.start_timeout = start_timeout
        """Seconds `open()` waits for the first connection (a server may be slow to start)."""
        self.connect_timeout = connect_timeout
        """Seconds a call waits for a server that is being restarted before it is told the
        server is not reachable."""
        self.close_timeout = close_timeout
        """Seconds `aclose()` gives the session to close before it is cancelled."""
        self.answerers = _names(name, "answerers", answerers)
        """Who may answer the server's questions (users, user groups, or `anyone`); empty:
        the person whose request it is."""
        self.request_state_ttl = request_state_ttl
        """Seconds the server keeps a `requestState` valid, when known (the SDK's default is
        600): a card for its question expires no later. The protocol does not carry it."""
        self._backoff = backoff or Backoff()
        self._tools: dict[str, MCPTool] = {}
        self._secrets: list[str] = []
        self._connection: Connection | None = None
        self._closed = False

    @classmethod
    def stdio(
        cls,
        name: str,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server run as a subprocess, spoken to over its stdin and stdout. `${NAME}` in
        `command` and `env` is read from the environment at start."""
        return cls(name, command=command, env=env, cwd=cwd, **options)

    @classmethod
    def http(
        cls, name: str, url: str, *, headers: Mapping[str, str] | None = None, **options: Any
    ) -> MCPServer:
        """A server at a streamable HTTP endpoint. `${NAME}` in `url` and `headers` is read
        from the environment at start (`"Bearer ${TICKETS_TOKEN}"`)."""
        return cls(name, url=url, headers=headers, **options)

    def __repr__(self) -> str:
        return f"MCPServer({self.name!r}, tools={sorted(self._tools)!r})"

    @property
    def command(self) -> tuple[str, ...]:
        """The stdio server's command as given (`${NAME}` not read); empty for HTTP."""
        return self._command

    # ------------------------------------------------------------ lifecycle

    def tools(self) -> list[MCPTool]:
        return list(self._tools.values())

    async def open(self) -> None:
        if self._closed:
            raise UsageError(f"MCP server `{self.name}` was closed; make a new one")
        if self._connection is None:
            self._connection = Connection(
                server=self.name,
                launch=self._launch(),
                backoff=self._backoff,
                on_tools=self._offer,
                hide=self._hide,
            )
        await self._connection.start(wait=self.start_timeout)

    async def aclose(self) -> None:
        self._closed = True
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.stop(grace=self.close_timeout)
        self._tools = {}

    async def __aenter__(self) -> MCPServer:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def reachable(self) -> bool:
        """Whether a session is open now (a call would be sent at once)."""
        return self._connection is not None and not self._connection.dead

    @property
    def restarts(self) -> int:
        """How many times the server was started again after its connection ended."""
        return 0 if self._connection is None else self._connection.restarts

    def _launch(self) -> Launch:
        """The command, env, url and headers with `${ENV}` read now; the values are kept to be
        masked in log lines."""

        def read(text: str) -> str:
            value = expand(text, server=self.name)
            if names_in(text):
                self._secrets.append(value)
            return value

        return Launch(
            command=tuple(read(part) for part in self._command),
            env={key: read(value) for key, value in self._env.items()},
            cwd=self._cwd,
            url=read(self._url),
            headers={key: read(value) for key, value in self._headers.items()},
        )

    def _hide(self, text: str) -> str:
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "[redacted]")
        return text

    # ---------------------------------------------------------------- tools

    def _offer(self, listed: list[ServerTool]) -> None:
        """Make the tools to offer from the server's list: allowed ones, named for the model,
        each with its gate."""
        tools: dict[str, MCPTool] = {}
        for remote in listed:
            if self.allowed is not None and matches(remote.name, self.allowed) is None:
                continue
            name = self._model_name(remote.name)
            if name in tools:
                log.warning(
                    "MCP server %s: tool %r is left out: another one is also offered as %s",
                    self.name,
                    remote.name,
                    name,
                )
                continue
            gate = gate_of(
                remote.name,
                remote.annotations,
                trusted=self.trust_annotations,
                approvals=self.approvals,
                default=self.approval,
                idempotent=self.idempotent,
            )
            tools[name] = MCPTool(
                server=self.name,
                name=name,
                remote=remote,
                gate=gate,
                redact=self.redact,
                call=self._call,
            )
        self._tools = tools

    def _model_name(self, remote: str) -> str:
        """`<prefix>_<tool>` in the characters a model's function name may hold, 64 at most."""
        base = _NOT_IN_NAME.sub("_", remote)
        name = f"{self.prefix}_{base}" if self.prefix else base
        return name[:64]

    async def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Send the call; every way it can fail is a result the model reads, saying whether it
        may have taken effect.

        A server on the current protocol may answer with an input-required result: it is kept
        in the handler's scope (the run stores it with the call) and its questions pause the
        call (`Suspended`); the resumed call sends the retry from the stored round, with the
        answers and the same `requestState`, so the first round is never sent again."""
        scope = current_scope.get()
        for attempt in range(_ROUNDS):
            held = None if scope is None else scope.input_required
            seed: InputResponses | None = None
            if held is not None:
                assert scope is not None
                try:
                    seed = responses(
                        held, scope, server=self.name, tool=tool, answerers=self.answerers
                    )
                except Unanswerable as exc:
                    return f"Error: `{tool}` of the {self.name} server cannot continue: {exc}."
                except UsageError as exc:  # a requestedSchema that is no JSON Schema
                    return (
                        f"Error: the {self.name} server asked for input for `{tool}` in a form "
                        f"that cannot be shown ({exc}); the call did not complete."
                    )
                if not held.get("inputRequests"):
                    # Only a state to send back: the server asks to be polled.
                    await asyncio.sleep(min(0.05 * 2**attempt, 0.25))
            sent_at = time.time()  # The lifetime of a state this round gets starts after this.
            result = await self._send(tool, arguments, held, seed, refused=refused_links(held))
            if not isinstance(result, InputRequiredResult):
                return result
            if scope is None:
                return f"Error: the {self.name} server asked for input, which `{tool}` cannot get."
            scope.input_required = held_of(result, lifetime=self.request_state_ttl, sent_at=sent_at)
        return (
            f"Error: the {self.name} server asked for input for `{tool}` more than {_ROUNDS} "
            "times; the call was given up."
        )

    async def _send(
        self,
        tool: str,
        arguments: dict[str, Any],
        held: dict[str, Any] | None,
        seed: InputResponses | None,
        *,
        refused: list[str],
    ) -> str | InputRequiredResult:
        """One `tools/call` round: its text result, or the server's input-required result.
        `refused`: the links of this round declined unasked (not https); the result says so,
        as do those of questions asked during the call."""
        connection = self._connection
        client = None if connection is None else await connection.session(wait=self.connect_timeout)
        if client is None:
            return (
                f"Error: the {self.name} server is not reachable; `{tool}` was certainly not run."
            )
        assert connection is not None
        call = OpenCall(
            server=self.name,
            tool=tool,
            scope=current_scope.get(),
            questions=live_questions.get(),
            answerers=self.answerers,
        )
        try:
            with connection.open_call(call):
                result = await client.session.call_tool(
                    tool,
                    arguments,
                    read_timeout_seconds=self.timeout,
                    input_responses=seed,
                    request_state=None if held is None else held.get("requestState"),
                    allow_input_required=True,
                )
        except MCPError as exc:
            if held is not None and _refused_state(exc):
                return (
                    f"Error: the {self.name} server could not continue `{tool}` after a restart: "
                    "it refused the stored state of the request (it may have lost the key it "
                    "signs it with, or the state expired); the answer was not used and nothing "
                    "was retried."
                )
            if exc.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
                why = "stopped" if exc.code == CONNECTION_CLOSED else "did not answer in time"
                return (
                    f"Interrupted: the {self.name} server {why} while `{tool}` ran; "
                    "it may or may not have taken effect."
                )
            return f"Error: the {self.name} server answered `{tool}` with an error: {exc.message}"
        except Exception as exc:
            log.warning(
                "MCP server %s: call of %s failed: %s", self.name, tool, self._hide(repr(exc))
            )
            return (
                f"Interrupted: the call of `{tool}` to the {self.name} server failed "
                f"({type(exc).__name__}); it may or may not have taken effect."
            )
        if isinstance(result, InputRequiredResult):
            return result
        return refused_note(self.name, [*refused, *call.refused]) + result_text(
            self.name, tool, result
        )


def _refused_state(exc: MCPError) -> bool:
    """The SDK's refusal of a `requestState` it did not mint, or minted under another key, or
    that expired (`INVALID_PARAMS` with reason `invalid_request_state`)."""
    data = exc.data
    return (
        exc.code == INVALID_PARAMS
        and isinstance(data, dict)
        and data.get("reason") == "invalid_request_state"
    )


def _names(server: str, what: str, names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise UsageError(f"MCP server `{server}`: {what} must be a list of names, got {names!r}")
    return tuple(names)


def _check_rule(server: str, where: str, rule: object) -> None:
    if not isinstance(rule, bool | Approval) and not callable(rule):
        raise UsageError(
            f"MCP server `{server}`: {where} must be a bool, an Approval or a policy callable, "
            f"got {rule!r}"
        )
