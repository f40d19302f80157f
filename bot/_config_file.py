"""An agent declared in a TOML file (`handback run handback.toml`): its model, instructions, MCP
servers, Python tools, approval rules and per-channel tool sets, validated with pydantic.

A wrong file is refused as a whole, with one line per problem naming the field's path
(`servers.repo.approvals.git_commit.count: ...`). `${NAME}` in a server's command, env, url and
headers stays as written here: `MCPServer` reads the variable when it starts the server and
masks its value in every log line; this module only checks that it is set, by name.
"""

from __future__ import annotations

import importlib
import os
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from state import Approval, ApprovalRuleError, UsageError

from ._agent import Agent
from ._agent_ref import AgentRefError, load_module_agent, shadowing
from ._channels import OTHER_CHANNELS, is_channel_id
from ._model import resolve_model
from ._tool import ApprovalRule, Tool, as_tool
from .mcp import MCPServer
from .mcp._env import names_in

__all__ = ["ConfigFileError", "agent_from_file", "is_config_file", "load_agent"]

SUFFIX = ".toml"


class ConfigFileError(AgentRefError):
    """The file cannot be served; `problems` has one line per problem, each naming its field."""

    def __init__(self, path: Path, problems: Sequence[str]) -> None:
        self.path = path
        self.problems = tuple(problems)
        count = f"{len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"
        super().__init__("\n".join([f"{path}: {count}", *(f"  {p}" for p in self.problems)]))


class _Strict(BaseModel):
    # A typo in a key is a problem, not a setting silently ignored; `"2"` is not a count.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class RuleFile(_Strict):
    """`Approval`'s fields, as a table: who approves, how many, edits, grants, reminders."""

    approvers: list[str] = []
    count: int = 1
    editable: bool = False
    grants: list[Literal["thread", "channel"]] = []
    grant_ttl: float = 3600.0
    grant_requesters: list[str] = []
    grant_arguments: list[str] = []
    remind_after: float | None = None
    escalate_to: list[str] = []
    escalate_after: float | None = None

    @model_validator(mode="after")
    def _is_an_approval(self) -> RuleFile:
        self.approval()  # Approval's own checks, reported at this table's path
        return self

    def approval(self) -> Approval:
        try:
            return Approval(**{f.name: getattr(self, f.name) for f in fields(Approval)})
        except ApprovalRuleError as error:
            raise ValueError(str(error).removeprefix("Approval.")) from None


def _rule_kind(value: object) -> str:
    return "rule:bool" if isinstance(value, bool) else "rule:table"


Rule = Annotated[
    Annotated[bool, Tag("rule:bool")] | Annotated[RuleFile, Tag("rule:table")],
    Discriminator(_rule_kind),
]
"""`true` (an approval by the approvers from the environment), `false` (none), or a table.
Told apart by the value's type, so a wrong table gets its own errors, not the bool's too."""


def _rule(rule: Rule) -> ApprovalRule:
    return rule.approval() if isinstance(rule, RuleFile) else rule


class ServerFile(_Strict):
    """An MCP server: `command` (stdio) or `url` (streamable HTTP), and how its tools are gated."""

    command: list[Annotated[str, Field(min_length=1)]] | None = None
    env: dict[str, str] = {}
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    prefix: str | None = None
    tools: list[str] | None = None
    trust_annotations: bool = False
    approval: Rule = True
    approvals: dict[str, Rule] = {}
    redact: list[str] = []
    idempotent: list[str] = []
    timeout: float | None = None

    @field_validator("approval")
    @classmethod
    def _not_all_unapproved(cls, rule: Rule) -> Rule:
        if rule is False:
            raise ValueError(
                "`false` would run every tool unapproved; name the tools that need none in "
                "`approvals` (`tool = false`)"
            )
        return rule

    @model_validator(mode="after")
    def _one_transport(self) -> ServerFile:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (stdio) or `url` (streamable HTTP)")
        if self.command is not None and (self.url is not None or self.headers):
            raise ValueError("`url` and `headers` are for HTTP servers, not `command` ones")
        if self.url is not None and (self.env or self.cwd is not None):
            raise ValueError("`env` and `cwd` are for stdio servers, not `url` ones")
        if self.command == []:
            raise ValueError("`command` is empty")
        return self

    def variables(self) -> dict[str, str]:
        """The places `${NAME}` may be written, by field path below the server."""
        found = {f"command[{i}]": part for i, part in enumerate(self.command or ())}
        found |= {f"env.{key}": value for key, value in self.env.items()}
        found |= {f"headers.{key}": value for key, value in self.headers.items()}
        if self.url is not None:
            found["url"] = self.url
        return found

    def build(self, name: str) -> MCPServer:
        return MCPServer(
            name,
            command=self.command or (),
            env=self.env,
            cwd=self.cwd,
            url=self.url,
            headers=self.headers,
            prefix=self.prefix,
            tools=self.tools,
            trust_annotations=self.trust_annotations,
            approvals={tool: _rule(rule) for tool, rule in self.approvals.items()},
            approval=_rule(self.approval),
            redact=self.redact,
            idempotent=self.idempotent,
            timeout=self.timeout,
        )


class ToolFile(_Strict):
    """A Python tool by import path (`package.module:function`), and its rule."""

    import_: str = Field(alias="import", min_length=1)
    approval: Rule | None = None
    """None: as the code says (a `Tool`'s own rule; a plain function needs none)."""


class ChannelFile(_Strict):
    tools: list[Annotated[str, Field(min_length=1)]]
    """Server names (all their tools) and tool names or globs (`repo_git_*`)."""
    approvals: dict[str, Rule] = {}
    """Tool name or glob (as the model sees it) -> its rule in this channel, over its own."""


class AgentFile(_Strict):
    """The whole file."""

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    instructions: str | None = None
    max_iterations: int = Field(default=10, ge=1)
    servers: dict[str, ServerFile] = {}
    tools: list[ToolFile] = []
    channels: dict[str, ChannelFile] | None = None


def is_config_file(ref: str) -> bool:
    """Whether `handback run REF` names a config file rather than `MODULE:ATTR`."""
    return ref.endswith(SUFFIX)


def agent_from_file(path: str | Path) -> Agent:
    """The `Agent` the file declares; `ConfigFileError` listing every problem found."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigFileError(path, [f"cannot be read: {error.strerror or error}"]) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigFileError(path, [f"is not TOML: {error}"]) from None
    except UnicodeDecodeError:
        raise ConfigFileError(path, ["is not UTF-8 text"]) from None
    try:
        declared = AgentFile.model_validate(data)
    except ValidationError as error:
        raise ConfigFileError(path, [_problem(e) for e in error.errors()]) from None
    return _Builder(path, declared).agent()


def _problem(error: Any) -> str:
    where = _path(error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "not a field handback reads (a typo?)"
    return f"{where}: {message}" if where else message


_UNION_TAGS = ("rule:bool", "rule:table")


def _path(loc: Sequence[int | str]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part in _UNION_TAGS:
            continue  # pydantic's name of a union member, not a key of the file
        else:
            parts.append(("." if parts else "") + (part if _bare(part) else repr(part)))
    return "".join(parts)


def _bare(key: str) -> bool:
    return key.replace("_", "").replace("-", "").isalnum()


class _Builder:
    """Makes the agent from a validated file, collecting the problems only building finds
    (imports, names, environment variables) instead of stopping at the first."""

    def __init__(self, path: Path, declared: AgentFile) -> None:
        self.path = path
        self.declared = declared
        self.problems: list[str] = []

    def agent(self) -> Agent:
        declared = self.declared
        try:
            resolve_model(declared.model)
        except UsageError as error:
            self.problems.append(f"model: {error}")
        servers = self._servers()
        tools = self._tools()
        channels = self._channels(servers, tools)
        channel_rules = self._channel_rules(servers, tools)
        if self.problems:
            raise ConfigFileError(self.path, self.problems)
        try:
            return Agent(
                name=declared.name,
                model=declared.model,
                tools=[*tools, *servers],
                system_prompt=declared.instructions,
                max_iterations=declared.max_iterations,
                channels=channels,
                channel_rules=channel_rules,
            )
        except UsageError as error:
            raise ConfigFileError(self.path, [str(error)]) from None

    def _servers(self) -> list[MCPServer]:
        built = []
        for name, server in self.declared.servers.items():
            for where, text in server.variables().items():
                missing = [v for v in names_in(text) if v not in os.environ]
                if missing:
                    listed = ", ".join(f"`{v}`" for v in missing)
                    self.problems.append(
                        f"servers.{name}.{where}: environment variable {listed} is not set"
                    )
            try:
                built.append(server.build(name))
            except UsageError as error:
                self.problems.append(f"servers.{name}: {error}")
        return built

    def _tools(self) -> list[Tool]:
        folder = str(self.path.resolve().parent)
        if folder not in sys.path:
            # The file's folder, as `handback run module:attr` imports from the current one.
            sys.path.insert(0, folder)
        built: list[Tool] = []
        if self.declared.tools:
            try:
                shadowing(Path(folder))
            except UsageError as error:
                self.problems.append(f"tools: {error}")
                return built
        for index, entry in enumerate(self.declared.tools):
            where = f"tools[{index}].import"
            try:
                target = _import(entry.import_)
                built.append(_tool(target, entry.approval))
            except (UsageError, ImportError, AttributeError) as error:
                self.problems.append(f"{where}: {error}")
        return built

    def _channels(self, servers: list[MCPServer], tools: list[Tool]) -> dict[str, list[str]] | None:
        declared = self.declared.channels
        if declared is None:
            return None
        names = {server.name for server in servers} | {tool.name for tool in tools}
        prefixes = [f"{s.prefix}_" if s.prefix else "" for s in servers]
        sets = {}
        for channel, offered in declared.items():
            if channel != OTHER_CHANNELS and not is_channel_id(channel):
                self.problems.append(
                    f"channels.{channel}: not a Slack channel id (C…, G…, D…) or "
                    f"'{OTHER_CHANNELS}' (every other channel)"
                )
            for index, entry in enumerate(offered.tools):
                if not _could_match(entry, names, prefixes):
                    self.problems.append(
                        f"channels.{channel}.tools[{index}]: {entry!r} names no server or tool "
                        f"of this agent (servers and tools: {', '.join(sorted(names)) or 'none'})"
                    )
            sets[channel] = list(offered.tools)
        return sets

    def _channel_rules(
        self, servers: list[MCPServer], tools: list[Tool]
    ) -> dict[str, dict[str, ApprovalRule]] | None:
        declared = self.declared.channels
        if declared is None or not any(c.approvals for c in declared.values()):
            return None
        names = {tool.name for tool in tools}
        prefixes = {s.name: f"{s.prefix}_" if s.prefix else "" for s in servers}
        rules: dict[str, dict[str, ApprovalRule]] = {}
        for channel, offered in declared.items():
            for tool in offered.approvals:
                where = f"channels.{_path([channel])}.approvals.{_path([tool])}"
                if not _could_match(tool, names, list(prefixes.values())):
                    self.problems.append(
                        f"{where}: {tool!r} names no tool of this agent (a tool's name as the "
                        "model sees it, or a glob: `repo_git_*`)"
                    )
                elif not _in_set(tool, offered.tools, prefixes):
                    self.problems.append(
                        f"{where}: {tool!r} is not offered in this channel (its `tools`: "
                        f"{', '.join(offered.tools)}), so a rule for it there would never apply"
                    )
            rules[channel] = {tool: _rule(rule) for tool, rule in offered.approvals.items()}
        return rules


def _in_set(tool: str, entries: Sequence[str], prefixes: dict[str, str]) -> bool:
    """Whether the tool (or glob) `tool` can be in a channel's set `entries`: named by it, by a
    glob of it, or a tool of a server it names."""
    return any(
        entry == tool
        or fnmatchcase(tool, entry)
        or fnmatchcase(entry, tool)
        or (entry in prefixes and tool.startswith(prefixes[entry]))
        for entry in entries
    )


def _could_match(entry: str, names: set[str], prefixes: list[str]) -> bool:
    """Whether `entry` can name something: a server or tool by name or glob, or a tool of a
    server (by its prefix; those are known only once the server runs)."""
    if any(fnmatchcase(name, entry) for name in names):
        return True
    return any(entry.startswith(prefix) for prefix in prefixes)


def _import(ref: str) -> object:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"import {ref!r} is not `module:attribute`")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise UsageError(f"cannot import `{module_name}`: {error}") from None
    except Exception as error:
        raise UsageError(
            f"importing `{module_name}` failed: {type(error).__name__}: {error}"
        ) from None
    target: object = module
    for part in attr.split("."):
        if not hasattr(target, part):
            raise UsageError(f"module `{module_name}` has no attribute `{attr}`")
        target = getattr(target, part)
    return target


def _tool(target: object, rule: Rule | None) -> Tool:
    if isinstance(target, Tool):
        if rule is not None:
            raise UsageError(
                f"`{target.name}` is a Tool with its own rule in code; give `approval` there, "
                "or import the plain function"
            )
        return target
    if not callable(target):
        raise UsageError(f"{target!r} is neither a function nor a bot.Tool")
    function: Callable[..., Any] = target
    if rule is None:
        return as_tool(function)
    return Tool(function, requires_approval=_rule(rule))


def load_agent(ref: str) -> Agent:
    """The agent `ref` names: a config file (`handback.toml`) or `MODULE:ATTR`."""
    if is_config_file(ref):
        return agent_from_file(ref)
    return load_module_agent(ref)
