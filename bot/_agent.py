"""`Agent`: what an agent is (its name, model, tools, commands and store) and the calls that
make its runs; a run itself is an `AgentRun` (`bot/_run.py`)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from state import RunRecord, RunStore, Store, mask_url, open_store, resolve_store_url

from ._channel_rules import ChannelRules
from ._channels import ChannelTools
from ._command import direct_call
from ._errors import UsageError
from ._model import Model, resolve_model
from ._nested import AgentTool
from ._run import AgentRun
from ._tool import ApprovalRule, Tool, as_tool
from ._toolset import Toolset

__all__ = ["Agent"]

log = logging.getLogger("handback.agent")

# Caller-chosen run ids become store keys and appear in logs and Slack payloads.
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}")


class Agent:
    """An LLM agent whose tools may pause the run with `suspend()` and be resumed later.

    Its runs are saved in `store`. An agent made without one saves them where `open_store()`
    points when the first run starts (`$HANDBACK_STORE`, else `sqlite:///handback.db`): its
    `repr` names that URL, and opening it is logged. `SlackBot` lends such an agent the app's
    store while the app is open, and refuses an agent whose store is another one.
    """

    def __init__(
        self,
        name: str,
        model: str | Model,
        tools: Sequence[Tool | Toolset | Callable[..., Any]] = (),
        system_prompt: str | None = None,
        max_iterations: int = 10,
        store: Store | None = None,
        description: str | None = None,
        channels: Mapping[str, Sequence[str]] | None = None,
        channel_rules: Mapping[str, Mapping[str, ApprovalRule]] | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise UsageError(f"Agent name must be a non-empty string, got {name!r}")
        if max_iterations < 1:
            raise UsageError(f"max_iterations must be at least 1, got {max_iterations!r}")
        self.name = name
        self.description = description
        """What the agent does, for the model of an agent that uses this one as a tool."""
        self.model = resolve_model(model)
        self._tools: dict[str, Tool] = {}
        self.toolsets: list[Toolset] = []
        """Sources of tools known once open (MCP servers), read again at every step."""
        for item in tools:
            if isinstance(item, Toolset):
                if any(t.name == item.name for t in self.toolsets):
                    raise UsageError(f"Agent `{name}` has two toolsets named `{item.name}`")
                self.toolsets.append(item)
                continue
            tool = item.as_tool() if isinstance(item, Agent) else as_tool(item)
            if tool.name in self._tools:
                raise UsageError(f"Agent `{name}` has two tools named `{tool.name}`")
            self._tools[tool.name] = tool
        self.channels = None if channels is None else ChannelTools.of(channels)
        """Per channel, the tools offered there (see `bot/_channels.py`); None: every tool in
        every channel."""
        self.channel_rules = None if channel_rules is None else ChannelRules.of(channel_rules)
        """Per channel, approval rules over the tools' own (see `bot/_channel_rules.py`)."""
        self.system_prompt = system_prompt
        self.max_iterations = max_iterations
        self.store: Store | None = store
        """Where runs are saved; None opens `$HANDBACK_STORE` (else `sqlite:///handback.db`) when
        the first run starts, and says so in the log (and, before that, in `repr`)."""
        self.commands: dict[str, Tool] = {}
        """The tools people may run as slash commands, by command (`/deploy`)."""
        for tool in self._tools.values():
            if tool.command is not None:
                if tool.command in self.commands:
                    raise UsageError(f"Agent `{name}` has two tools for `{tool.command}`")
                self.commands[tool.command] = tool
        self._owned = AsyncExitStack()
        self._store_lock = asyncio.Lock()
        self._hidden: set[tuple[str, str]] = set()

    def __repr__(self) -> str:
        if self.store is not None:
            store = repr(self.store)
        else:
            store = f"None (opens {mask_url(resolve_store_url(None))!r} on first use)"
        return f"Agent({self.name!r}, tools={list(self.tools)!r}, store={store})"

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools offered now: the agent's own, then its toolsets' (a toolset tool whose name
        an own tool holds is left out, with a log line: the own tool is what the code means)."""
        if not self.toolsets:
            return self._tools
        tools = dict(self._tools)
        for toolset in self.toolsets:
            for tool in toolset.tools():
                if tool.name in tools:
                    if (toolset.name, tool.name) not in self._hidden:  # said once, not per step
                        self._hidden.add((toolset.name, tool.name))
                        log.warning(
                            "agent %s: tool %s of %s is hidden by a tool of that name",
                            self.name,
                            tool.name,
                            toolset.name,
                        )
                    continue
                tools[tool.name] = tool
        return tools

    @property
    def _tool_specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self.tools.values()]

    def tools_in(self, channel: str | None, within: Sequence[ChannelTools] = ()) -> dict[str, Tool]:
        """The tools offered now in `channel` (None: a run outside any channel), as they are
        there: all of them unless the agent has per-channel tool sets (`channels=`), each with
        the channel's approval rule where `channel_rules=` gives one.

        `within` are the tool sets of the agents this one runs as a tool of (outermost first):
        a nested agent is offered only what every caller's set offers in the channel too."""
        tools = self.tools
        boundaries = [*within, *([self.channels] if self.channels is not None else [])]
        if boundaries:
            source = {
                tool.name: toolset.name
                for toolset in self.toolsets
                for tool in toolset.tools()
                if tool.name not in self._tools
            }
            tools = {
                name: tool
                for name, tool in tools.items()
                if all(b.offers(channel, name, source.get(name)) for b in boundaries)
            }
        if self.channel_rules is not None:
            tools = self.channel_rules.apply(channel, tools)
        return tools

    @asynccontextmanager
    async def toolsets_open(self) -> AsyncIterator[None]:
        """Open the toolsets (MCP sessions) for the body, close them after it, even when it
        fails or is cancelled."""
        try:
            for toolset in self.toolsets:
                await toolset.open()
            yield
        finally:
            for toolset in reversed(self.toolsets):
                await toolset.aclose()

    def as_tool(
        self, *, description: str | None = None, requires_approval: ApprovalRule = False
    ) -> Tool:
        """This agent as a tool of another agent (what `tools=[agent]` does with defaults): the
        model sends it a prompt, its answer is the tool result, and its pauses pause the caller
        (see `bot/_nested.py`)."""
        return AgentTool(self, description=description, requires_approval=requires_approval)

    def __call__(
        self,
        prompt: str | None = None,
        parent_id: str | None = None,
        resume: dict[str, Any] | None = None,
        run_id: str | None = None,
        by: Sequence[str] = (),
        claimed: RunRecord | None = None,
        channel: str | None = None,
        thread: tuple[str, str] | None = None,
        stop_seen: str | None = None,
    ) -> AgentRun:
        """A run of this agent: a new conversation (`prompt`), its continuation (`parent_id` and
        `prompt`), or the resume of a paused run (`parent_id` and `resume`).

        `run_id` names the run instead of a fresh id; calling again with the same id (a retried
        work item) never runs what the earlier attempt ran: a run it saved paused or ended emits
        its events again from the store, one whose process died while tools ran continues.

        `by` names the people behind this call (who sent the prompt, who gave the answers); the
        run keeps them with those of its parent while the turn goes on (`AgentRun.requesters`).
        `claimed` is the paused parent as a store claim just returned it, claimed for `run_id`
        (e.g. by `answer_and_claim`, with the answer): the resume then reads and claims nothing
        before it runs. Only for a claim this call's caller won just now: a run whose earlier
        attempt may have saved something must be resumed without it, so that it is found.

        `channel` is the Slack channel the run talks in: with per-channel tool sets it is
        offered, and may run, only that channel's tools.

        `thread` (channel, thread_ts) and `stop_seen` (the thread's stop mark as the store keeps
        it, `state.stop_mark`, when this turn began) start a new turn there: from then on the
        store refuses to resume this run's requests once the thread keeps another mark. A
        resume carries its parent's on (it is the same turn) and ignores them; a new turn
        without them is checked against no stop.
        """
        if run_id is not None:
            if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
                raise UsageError(
                    "run_id must be 1-200 ASCII letters, digits, `_`, `.`, `:`, `/` or `-`, "
                    f"starting with a letter or digit, got {run_id!r}"
                )
            if run_id == parent_id:
                raise UsageError(f"run_id {run_id!r} cannot be its own parent_id")
        if resume is not None:
            if not isinstance(resume, dict):
                raise UsageError(
                    "resume must be a dict of {interaction_id: value}, "
                    f"got {type(resume).__name__}"
                )
            if not resume:
                raise UsageError("resume must answer at least one interaction")
            if parent_id is None:
                raise UsageError("resume needs parent_id: the run_id of the paused run")
        elif prompt is None:
            raise UsageError("an agent call needs a prompt, or parent_id and resume")
        if claimed is not None and (
            resume is None
            or run_id is None
            or claimed.run_id != parent_id
            or claimed.resumed_by != run_id
        ):
            raise UsageError(
                "claimed must be the paused parent (parent_id) claimed for run_id, with resume"
            )
        if prompt is not None and not isinstance(prompt, str):
            raise UsageError(f"prompt must be a str, got {type(prompt).__name__}")
        if isinstance(by, str) or not all(isinstance(person, str) and person for person in by):
            raise UsageError(f"by must be a sequence of non-empty str, got {by!r}")
        return AgentRun(
            self,
            prompt=prompt,
            parent_id=parent_id,
            resume=resume,
            run_id=run_id,
            by=by,
            claimed=claimed,
            channel=channel,
            thread=thread,
            stop_seen=stop_seen,
        )

    def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        text: str | None = None,
        run_id: str | None = None,
        channel: str | None = None,
        thread: tuple[str, str] | None = None,
        stop_seen: str | None = None,
    ) -> AgentRun:
        """A run that calls one tool directly, as a person's command does (`/deploy api 2.3`):
        through the approval gate like a call of the model, without the model; the tool's
        result is the output. `text` is what the person typed (the run's user message).

        The run is a conversation like any other: resumed with `parent_id` and `resume`, and
        continued by the model with `parent_id` and a prompt.
        """
        if name not in self.tools_in(channel):
            where = "" if channel is None or self.channels is None else f" in `{channel}`"
            raise UsageError(f"Agent `{self.name}` has no tool `{name}`{where}")
        if not isinstance(arguments, dict):
            raise UsageError(f"arguments must be a dict, got {type(arguments).__name__}")
        run = self(
            prompt=text if text is not None else f"Run `{name}`.",
            run_id=run_id,
            channel=channel,
            thread=thread,
            stop_seen=stop_seen,
        )
        run.direct = direct_call(name, arguments, run.run_id)
        return run

    def _nested_run(
        self,
        *,
        prompt: str | None,
        parent_id: str | None,
        resume: dict[str, Any] | None,
        run_id: str,
        path: str,
        store: RunStore,
        channel: str | None = None,
        within: Sequence[ChannelTools] = (),
    ) -> AgentRun:
        """A run of this agent as a tool of another (`bot/_nested.py` derives the arguments),
        in the caller's channel and inside the callers' tool sets (`within`)."""
        return AgentRun(
            self,
            prompt=prompt,
            parent_id=parent_id,
            resume=resume,
            run_id=run_id,
            path=path,
            store=store,
            channel=channel,
            within=within,
        )

    async def get_store(self) -> Store:
        if self.store is None:
            async with self._store_lock:
                if self.store is None:
                    url = resolve_store_url(None)
                    shown = mask_url(url)
                    log.info("agent %s: no store given, saving runs in %s", self.name, shown)
                    self.store = await self._owned.enter_async_context(open_store(url))
        return self.store

    async def aclose(self) -> None:
        """Close the store this agent opened itself (a store passed in is the caller's) and the
        model's connections on this event loop."""
        for toolset in reversed(self.toolsets):
            await toolset.aclose()
        await self._owned.aclose()
        close = getattr(self.model, "aclose", None)  # a model that holds connections has one
        if close is not None:
            await close()

    async def __aenter__(self) -> Agent:
        for toolset in self.toolsets:
            await toolset.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
