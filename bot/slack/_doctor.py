"""`handback doctor`: check a deployment's configuration and connections before it goes live.

Each check is one line: `ok`, `warn` (works, but look at it) or `FAIL` (blocks a start or
leaves people unable to answer), with what to do. Nothing here changes the store or Slack: the
store gets a probe that is removed at once, and an SQLite file that does not exist is not
created.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from blocks import ANYONE
from state import Approval, StoreError, missing_sqlite_file, open_store

# Coordination records of the Slack app, kept out of `state.__all__` (not for users).
from state._health import check_store

from .. import Agent, Tool
from .._channels import OTHER_CHANNELS
from .._model import OpenAIModel
from .._toolset import Toolset
from ._app import make_client
from ._card_fit import Sent, card_kinds, offline_problems, slack_problems
from ._gates import gate_rules, unknown_tool_names
from ._manifest import BOT_SCOPES
from ._model_probe import probe_model
from ._serve import check_model
from ._settings import ConfigError, Settings, unknown_variables

__all__ = ["Check", "cards", "channel_rules", "diagnose", "who_may_approve"]

Status = Literal["ok", "warn", "FAIL"]


@dataclass(kw_only=True, frozen=True)
class Check:
    """One line of the report."""

    status: Status
    name: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4}  {self.name}: {self.detail}"


async def diagnose(settings: Settings, agent: Agent) -> list[Check]:
    """Every check, in the order an operator fixes things: mode, model, store, Slack, people."""
    checks = [_mode(settings), await _model(settings, agent), await _store(settings)]
    client = make_client(settings)
    async with aiohttp.ClientSession() as session:
        client.session = session
        slack = await _slack(client, settings)
        checks += slack
        checks += await _people(client, settings)
        token_works = slack[0].name == "SLACK_BOT_TOKEN" and slack[0].status == "ok"
        checks += await cards(client if token_works else None)
    # The toolsets (MCP servers) are started, so their tools and rules can be listed.
    async with agent.toolsets_open():
        checks += [_toolset(toolset) for toolset in agent.toolsets]
        checks += [
            Check(status="ok" if opens else "FAIL", name=f"approvals of `{tool}`", detail=who)
            for tool, who, opens in who_may_approve(settings, agent)
        ]
        checks += [
            Check(
                status="FAIL",
                name=f"HANDBACK_TOOL_APPROVERS[{tool}]",
                detail=f"agent `{agent.name}` has no tool `{tool}`, so `handback run` will not "
                "start",
            )
            for tool in unknown_tool_names(agent, settings)
        ]
        checks += channel_rules(settings, agent)
    checks += _variables()
    return checks


def _toolset(toolset: Toolset) -> Check:
    name = f"tools of `{toolset.name}`"
    tools = toolset.tools()
    if not tools:
        return Check(
            status="FAIL", name=name, detail="none: the server did not start or lists none"
        )
    return Check(status="ok", name=name, detail=", ".join(tool.name for tool in tools))


def _mode(settings: Settings) -> Check:
    if settings.socket_mode:
        return Check(status="ok", name="mode", detail="Socket Mode (SLACK_APP_TOKEN is set)")
    if settings.slack_signing_secret is None:  # the settings refuse this; kept for safety
        return Check(
            status="FAIL",
            name="mode",
            detail="HTTP mode without SLACK_SIGNING_SECRET: set it from Basic Information",
        )
    return Check(
        status="ok",
        name="mode",
        detail=f"HTTP on {settings.host}:{settings.port}, SLACK_SIGNING_SECRET is set",
    )


async def _model(settings: Settings, agent: Agent) -> Check:
    try:
        check_model(agent, settings)
    except ConfigError as error:
        return Check(status="FAIL", name="model", detail=f"{error}: set it in the environment")
    model = agent.model
    if not isinstance(model, OpenAIModel):
        return Check(status="ok", name="model", detail=f"agent `{agent.name}` uses `{model.name}`")
    where = model.base_url or settings.openai_base_url or "api.openai.com"
    uses = f"agent `{agent.name}` uses `openai/{model.name}` at {where}"
    probe = await probe_model(model)
    return Check(
        status="ok" if probe.ok else "FAIL", name="model", detail=f"{uses}: {probe.detail}"
    )


async def _store(settings: Settings) -> Check:
    url = settings.handback_store
    missing = missing_sqlite_file(url)
    if missing is not None:
        return Check(
            status="warn",
            name="store",
            detail=f"SQLite file {missing} does not exist yet; `handback run` creates it here. "
            "Use Redis (HANDBACK_STORE=redis://...) for more than one process",
        )
    try:
        async with open_store(url) as store:
            report = await check_store(store, url)
    except (StoreError, OSError) as error:
        return Check(status="FAIL", name="store", detail=f"cannot open {url!r}: {error}")
    if report.problem is not None:
        return Check(
            status="FAIL",
            name="store",
            detail=f"{report.kind} at {report.where} cannot be used: {report.problem}",
        )
    detail = f"{report.kind} at {report.where}, reachable and writable"
    if report.persistence is not None:
        detail += f"; persistence: {report.persistence}"
    if not report.durable:
        return Check(
            status="warn",
            name="store",
            detail=detail + ". A Redis restart would lose every paused run: turn on AOF "
            "(`appendonly yes`) or RDB snapshots",
        )
    return Check(status="ok", name="store", detail=detail)


async def _slack(client: AsyncWebClient, settings: Settings) -> list[Check]:
    try:
        response = await client.auth_test()
    except SlackApiError as error:
        code = error.response.get("error")
        return [
            Check(
                status="FAIL",
                name="SLACK_BOT_TOKEN",
                detail=f"Slack refused it ({code}): copy the Bot User OAuth Token (xoxb-) "
                "from OAuth & Permissions",
            )
        ]
    except (aiohttp.ClientError, TimeoutError) as error:
        return [
            Check(
                status="FAIL",
                name="Slack",
                detail=f"out of reach at {settings.slack_api_url} "
                f"({type(error).__name__}: {error})",
            )
        ]
    checks = [
        Check(
            status="ok",
            name="SLACK_BOT_TOKEN",
            detail=f"team {response.get('team')} ({response.get('team_id')}), "
            f"bot user {response.get('user')} ({response.get('user_id')})",
        ),
        _scopes(response.headers.get("x-oauth-scopes")),
    ]
    if settings.slack_app_token is not None:
        checks.append(await _app_token(client, settings.slack_app_token.get_secret_value()))
    return checks


async def cards(
    client: AsyncWebClient | None, kinds: Mapping[str, Sequence[Sent]] | None = None
) -> list[Check]:
    """Every card kind the bot sends, rendered at its extremes and checked against Slack's
    limits offline, then, with a working token, by Slack's `blocks.validate`: one line for
    all that fit, one line per kind that does not. `kinds` (default `card_kinds()`) lets a
    test hand in a card that breaks a limit."""
    kinds = card_kinds() if kinds is None else kinds
    checks = [
        Check(status="FAIL", name=f"card `{name}`", detail=f"Slack would refuse it ({problem})")
        for name, problem in offline_problems(kinds).items()
    ]
    if not checks:
        detail = f"all {len(kinds)} kinds fit Slack's limits (checked offline)"
        checks.append(Check(status="ok", name="cards", detail=detail))
    if client is None:
        return checks
    try:
        verdict = await slack_problems(client, kinds)
    except (aiohttp.ClientError, TimeoutError) as error:
        detail = f"blocks.validate out of reach ({type(error).__name__})"
        return [*checks, Check(status="warn", name="cards in Slack", detail=detail)]
    if not verdict.offered:
        detail = f"blocks.validate did not check them ({verdict.refusal})"
        return [*checks, Check(status="warn", name="cards in Slack", detail=detail)]
    checks += [
        Check(status="FAIL", name=f"card `{name}` in Slack", detail=f"blocks.validate: {said}")
        for name, said in verdict.problems.items()
    ]
    if not verdict.problems:
        detail = f"blocks.validate accepts all {len(kinds)} kinds"
        checks.append(Check(status="ok", name="cards in Slack", detail=detail))
    return checks


def _scopes(header: str | list[str] | None) -> Check:
    if isinstance(header, list):  # slack_sdk keeps repeated headers as a list
        header = ",".join(header)
    if header is None:
        return Check(
            status="warn", name="scopes", detail="Slack did not say which scopes the token has"
        )
    granted = {scope.strip() for scope in header.split(",") if scope.strip()}
    missing = [scope for scope in BOT_SCOPES if scope not in granted]
    if missing:
        return Check(
            status="FAIL",
            name="scopes",
            detail=f"missing {', '.join(missing)}: add them under OAuth & Permissions -> Bot "
            "Token Scopes (or update the manifest), then reinstall the app to the workspace",
        )
    return Check(status="ok", name="scopes", detail=f"all {len(BOT_SCOPES)} the app needs")


async def _app_token(client: AsyncWebClient, token: str) -> Check:
    try:
        await client.apps_connections_open(app_token=token)
    except SlackApiError as error:
        return Check(
            status="FAIL",
            name="SLACK_APP_TOKEN",
            detail=f"Slack refused it ({error.response.get('error')}): make an app-level token "
            "with connections:write under Basic Information",
        )
    except (aiohttp.ClientError, TimeoutError) as error:
        return Check(
            status="FAIL", name="SLACK_APP_TOKEN", detail=f"Slack is out of reach: {error!r}"
        )
    return Check(status="ok", name="SLACK_APP_TOKEN", detail="Socket Mode connections allowed")


async def _people(client: AsyncWebClient, settings: Settings) -> list[Check]:
    """Every user and user group the approver and answerer lists name, looked up in Slack."""
    named: dict[str, list[str]] = {}
    for entry in settings.handback_approvers:
        if entry == ANYONE:
            continue
        named.setdefault(entry, []).append("HANDBACK_APPROVERS")
    for tool, entries in settings.handback_tool_approvers.items():
        for entry in entries:
            named.setdefault(entry, []).append(f"HANDBACK_TOOL_APPROVERS[{tool}]")
    for entry in settings.handback_answerers:
        named.setdefault(entry, []).append("HANDBACK_ANSWERERS")
    return [await _person(client, entry, where) for entry, where in named.items()]


async def _person(client: AsyncWebClient, entry: str, where: list[str]) -> Check:
    name = f"{entry} (in {', '.join(where)})"
    lookup: Callable[[], Awaitable[str]]
    if entry.startswith("S"):

        async def lookup() -> str:
            found = await client.usergroups_users_list(usergroup=entry)
            return f"user group with {len(found.get('users') or [])} member(s)"
    else:

        async def lookup() -> str:
            found = await client.users_info(user=entry)
            user = found.get("user") or {}
            return f"user {user.get('name', '?')}"

    try:
        return Check(status="ok", name=name, detail=await lookup())
    except SlackApiError as error:
        return Check(status="FAIL", name=name, detail=_lookup_refused(entry, error.response))
    except (aiohttp.ClientError, TimeoutError) as error:
        return Check(status="FAIL", name=name, detail=f"Slack is out of reach: {error!r}")


def _lookup_refused(entry: str, response: Any) -> str:
    """Why Slack would not look `entry` up, in one line: a scope the token lacks (Slack says
    `missing_scope` and names it in `needed`) is not a wrong id."""
    code = response.get("error")
    if code == "missing_scope":
        needed = response.get("needed") or (
            "usergroups:read" if entry.startswith("S") else "users:read"
        )
        return (
            f"Slack said missing_scope: the token lacks {needed}, so the id cannot be checked "
            "(add it under OAuth & Permissions -> Bot Token Scopes, then reinstall the app)"
        )
    if code in {"user_not_found", "no_such_subteam", "subteam_not_found"}:
        if entry.startswith("S"):
            return f"Slack said {code}: the user group id is wrong"
        return (
            f"Slack said {code}: the user id is wrong "
            "(find it in the person's profile: ... -> Copy member ID)"
        )
    return f"Slack said {code}: the id could not be checked"


def who_may_approve(
    settings: Settings, agent: Agent, tools: Iterable[Tool] | None = None
) -> list[tuple[str, str, bool]]:
    """For each tool of the agent (or of `tools`) that can ask for approval, who may give it,
    in words, and whether that is a gate someone can open (False: nobody may approve it)."""
    found = []
    for rule in gate_rules(agent, settings, tools):
        if rule.anyone:
            who = "anyone in the channel but the requester (HANDBACK_APPROVERS=anyone)"
        elif rule.approvers:
            who = f"{', '.join(rule.approvers)} (from {rule.source})"
        else:
            who = (
                "nobody: no approver rule is set (HANDBACK_APPROVERS, HANDBACK_TOOL_APPROVERS "
                "or the tool's Approval(approvers=...)), so `handback run` will not start"
            )
        fixed = rule.fixed
        if fixed is None:
            when = "calls its policy picks (the policy may name other approvers per call)"
        else:
            when = "every call"
            if fixed.count > 1:
                when += f", by {fixed.count} distinct approvers"
        self_rule = (
            "the requester may approve their own request"
            if settings.handback_allow_self_approval and (fixed is None or fixed.count == 1)
            else "never the requester"
        )
        gated = rule.gated_because
        why = f" (gated: {gated})" if gated else ""
        found.append(
            (
                rule.tool,
                f"{when}{why}; {who}; {self_rule}, nor anyone who answered a question of the "
                f"same turn{_follow_up(fixed)}",
                bool(rule.approvers),
            )
        )
    return found


def _follow_up(rule: Approval | None) -> str:
    """What happens to an unanswered card of a fixed rule: its reminder and escalation."""
    if rule is None or rule.remind_after is None:
        return ""
    said = f"; approvers reminded after {rule.remind_after:g}s"
    if rule.escalate_to:
        after = rule.remind_after if rule.escalate_after is None else rule.escalate_after
        said += f", then {', '.join(rule.escalate_to)} added {after:g}s later"
    return said


def channel_rules(settings: Settings, agent: Agent) -> list[Check]:
    """With per-channel tool sets or rules: for each channel named, a line per tool offered
    there with its effective rule (the channel's own where it has one), and a line naming the
    tools it is not offered (the model never sees them there, and no approval can run them)."""
    named = [*(agent.channels.sets if agent.channels is not None else ())]
    if agent.channel_rules is not None:
        named += [c for c in agent.channel_rules.rules if c not in named]
    if not named:
        return []
    everything = agent.tools
    checks = []
    if OTHER_CHANNELS not in named:
        # Where no channel is named the tools keep their own rules: said, not left to guess.
        named.append(OTHER_CHANNELS)
    for channel in named:
        where = "every other channel" if channel == OTHER_CHANNELS else f"`{channel}`"
        # A run outside any channel gets the `*` set, as every channel not named does.
        offered = agent.tools_in(None if channel == OTHER_CHANNELS else channel)
        rules = {
            tool: (who, opens)
            for tool, who, opens in who_may_approve(settings, agent, offered.values())
        }
        for name, tool in offered.items():
            rule, opens = rules.get(name, ("runs without approval", True))
            if tool is not everything.get(name):
                rule = f"{rule} (this channel's rule)"
            checks.append(
                Check(status="ok" if opens else "FAIL", name=f"in {where}, `{name}`", detail=rule)
            )
        hidden = [name for name in everything if name not in offered]
        checks.append(
            Check(
                status="ok",
                name=f"in {where}, not offered",
                detail=", ".join(f"`{n}`" for n in hidden) if hidden else "none (every tool is)",
            )
        )
    return checks


def _variables() -> list[Check]:
    """A FAIL line for each `HANDBACK_*` variable handback does not read (a typo, or a setting
    of another version): the bot logs them and ignores them."""
    return [
        Check(
            status="FAIL",
            name=name,
            detail=f"not a setting handback reads (did you mean {close}?)"
            if close
            else "not a setting handback reads; it is ignored",
        )
        for name, close in unknown_variables(os.environ)
    ]
