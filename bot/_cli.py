"""The `handback` command: `handback run [MODULE:ATTR | FILE.toml]` serves an agent in Slack
(one in code, or one a config file declares), `handback dev`
opens the local playground, `handback doctor` checks a deployment, `handback audit` and
`handback pending` read the store, `handback grants` lists standing grants and
`handback grants revoke ID` ends one.

Mistakes in the command line or the configuration end with one line on stderr and exit code 2,
never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, cast

from ._agent_ref import DEFAULT_AGENT, AgentRefError

if TYPE_CHECKING:
    from ._agent import Agent
    from ._audit_filter import AuditFilter
    from .slack import Settings

__all__ = ["DEFAULT_AGENT", "AgentRefError", "load_agent", "main"]

DISTRIBUTION = "handback-slack"
"""The name on the package index (`pip install handback-slack`); the command stays `handback`.
`handback` there is another project."""
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141
"""As a shell reports a command ended by SIGPIPE (128 + 13)."""
EXIT_CHECK_FAILED = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="handback",
        description="Slack agents that stop mid-run and hand control back to people.",
    )
    parser.add_argument(
        "--version", action="version", version=f"handback {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="serve an agent in Slack (Socket Mode if SLACK_APP_TOKEN is set, else HTTP)",
        description="Serve an agent in Slack. Settings come from the environment; see "
        "docs/slack-app.md.",
    )
    run.add_argument(
        "agent",
        nargs="?",
        default=DEFAULT_AGENT,
        metavar="MODULE:ATTR|FILE.toml",
        help=f"the Agent to serve, or a config file declaring one (default: {DEFAULT_AGENT}, "
        "the chat-ops example)",
    )
    run.add_argument(
        "--role",
        choices=("all", "web", "worker"),
        default="all",
        help="all (default): take Slack requests and do the work; web: only verify, record "
        "and ack Slack's requests; worker: only work the store's inbox (no Slack endpoint, "
        "no Socket Mode; /healthz on PORT). Any number of each may share one store.",
    )
    dev = commands.add_parser(
        "dev",
        help="open the local playground: a Slack stand-in in your browser",
        description="Run the agent against a local Slack stand-in and open its page. Without "
        "OPENAI_API_KEY a scripted demo model answers.",
    )
    dev.add_argument(
        "file",
        nargs="?",
        default=None,
        metavar="FILE.toml",
        help="a config file declaring the agent to try (instead of --agent)",
    )
    dev.add_argument(
        "--agent",
        default=DEFAULT_AGENT,
        metavar="MODULE:ATTR",
        help=f"the Agent to try (default: {DEFAULT_AGENT})",
    )
    dev.add_argument(
        "--host", default="127.0.0.1", help="address to serve the page on (default: 127.0.0.1)"
    )
    dev.add_argument(
        "--port", type=int, default=8080, help="port to serve the page on (default: 8080)"
    )
    dev.add_argument("--no-browser", action="store_true", help="do not open a browser")
    dev.add_argument(
        "--example-mcp",
        action="store_true",
        help="run an agent on the bundled example MCP server (a read-only tool, a gated one, "
        "and one that asks a question), started over stdio",
    )
    doctor = commands.add_parser(
        "doctor",
        help="check the configuration and connections before going live",
        description="Check the settings, the model, the store (reachable, writable, "
        "persistent), the Slack tokens and scopes, the approver lists, and say who may approve "
        "each tool. One line per check; exit code 1 when something would block a start.",
    )
    doctor.add_argument(
        "agent",
        nargs="?",
        default=DEFAULT_AGENT,
        metavar="MODULE:ATTR|FILE.toml",
        help=f"the Agent (or config file) `handback run` will serve (default: {DEFAULT_AGENT}); "
        "its MCP servers are started and each tool's rule is printed per channel",
    )
    for name, help_text in [
        ("audit", "print the audit log, newest first: answers, refusals, expiries"),
        (
            "pending",
            "print the interactions still waiting: kind, tool, arguments (redacted), "
            "requester, channel, age, expiry",
        ),
    ]:
        view = commands.add_parser(name, help=help_text, description=help_text)
        _store_option(view)
        view.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
        view.add_argument("--json", action="store_true", help="one JSON object per line")
        if name == "audit":
            _audit_options(view)
    _grants_parser(commands)
    return parser


def _store_option(parser: argparse.ArgumentParser, *, nested: bool = False) -> None:
    parser.add_argument(
        "--store",
        # Nested: a sub-command's own default would replace a --store given before it.
        default=argparse.SUPPRESS if nested else None,
        metavar="URL",
        help="redis://... or sqlite:///path (default: HANDBACK_STORE, else sqlite:///handback.db)",
    )


def _audit_options(audit: argparse.ArgumentParser) -> None:
    from ._audit_filter import OUTCOMES

    audit.epilog = (
        "Filters combine (all must hold); a repeated one, or one with commas, takes any of its "
        "values. With a filter the whole log is read (the store keeps its newest "
        "10,000 entries) and --limit counts the entries that match. --tool and --channel come "
        "from the entry's interaction: entries without one (a revocation), or whose interaction "
        "the store no longer keeps (7 days after it closed), match neither."
    )
    audit.add_argument("--csv", action="store_true", help="CSV with a header row")
    for option, about in [
        ("--user", "who acted (a Slack user id, U...)"),
        ("--tool", "the tool the interaction asked about"),
        ("--channel", "the channel of the interaction (C...)"),
        ("--outcome", f"the action: {', '.join(OUTCOMES)}"),
    ]:
        audit.add_argument(option, action="append", default=[], help=about)
    for option, about in [("--since", "from"), ("--until", "up to")]:
        audit.add_argument(
            option,
            default=None,
            metavar="WHEN",
            help=f"entries {about} WHEN: an ISO date or time (UTC unless given) or a duration "
            "back from now (30m, 2h, 7d)",
        )


def _audit_filter(args: argparse.Namespace) -> AuditFilter:
    """Raises `UsageError` saying which value is wrong."""
    import time

    from ._audit_filter import AuditFilter, parse_outcomes, parse_time

    def names(values: list[str]) -> frozenset[str]:
        return frozenset(part.strip() for v in values for part in v.split(",") if part.strip())

    now = time.time()
    return AuditFilter(
        users=names(args.user),
        tools=names(args.tool),
        channels=names(args.channel),
        outcomes=parse_outcomes(args.outcome),
        since=None if args.since is None else parse_time("--since", args.since, now=now),
        until=None if args.until is None else parse_time("--until", args.until, now=now),
    )


def _grants_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    about = "print the standing grants in force: tool, scope, who gave them, until when"
    grants = commands.add_parser("grants", help=about, description=about)
    _store_option(grants)
    grants.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    grants.add_argument("--json", action="store_true", help="one JSON object per line")
    actions = grants.add_subparsers(
        dest="grants_command", metavar="ACTION", help="revoke: end a grant (default: list them)"
    )
    revoke_help = "end a standing grant now (audited); later calls show a card again"
    revoke = actions.add_parser("revoke", help=revoke_help, description=revoke_help)
    revoke.add_argument("grant_id", metavar="ID", help="the grant's id, as `handback grants` shows")
    _store_option(revoke, nested=True)
    revoke.add_argument(
        "--by",
        default=None,
        help="who revokes it, for the audit log (default: cli:<your login name>)",
    )


def _fail(message: str) -> int:
    print(f"handback: {message}", file=sys.stderr)
    return EXIT_USAGE


def load_agent(ref: str) -> Agent:
    """The agent `ref` names (a config file or `MODULE:ATTR`); the reader, with the MCP SDK it
    needs, is imported only by the commands that load an agent."""
    from ._config_file import load_agent as load

    return load(ref)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # `handback audit --json | head`: the reader has what it wanted. Point stdout at
        # /dev/null so the interpreter's own flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "dev":
        from .playground._dev import main as dev_main

        return int(
            dev_main(
                agent=args.file if args.file is not None else args.agent,
                host=args.host,
                port=args.port,
                open_browser=not args.no_browser,
                example_mcp=args.example_mcp,
            )
            or 0
        )
    if args.command in ("audit", "pending"):
        return _view(args)
    if args.command == "grants":
        return _grants(args)
    if args.command == "doctor":
        return _doctor(args.agent)
    return _run(args.agent, args.role)


def _version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _existing_store(url: str | None) -> str:
    """The store URL to read; raises `_Unusable` saying why it cannot be used."""
    from state import StoreURLError, missing_sqlite_file, resolve_store_url

    resolved = resolve_store_url(url)
    try:
        missing = missing_sqlite_file(resolved)
    except StoreURLError as error:
        raise _Unusable(str(error)) from None
    if missing is not None:
        # Opening it would create an empty database and report "empty": wrong folder, mostly.
        raise _Unusable(
            f"no store at {resolved} ({os.path.abspath(missing)} does not exist); "
            "pass --store or set HANDBACK_STORE to the bot's store"
        )
    return resolved


class _Unusable(Exception):
    """A command line or store that cannot be used; the message says why."""


def _grants(args: argparse.Namespace) -> int:
    import getpass

    from state import StoreError

    from ._admin import print_grants, revoke

    if args.grants_command is None and args.limit < 1:
        return _fail(f"--limit must be at least 1, got {args.limit}")
    try:
        resolved = _existing_store(args.store)
        if args.grants_command == "revoke":
            by = args.by or f"cli:{getpass.getuser()}"
            if not by.strip():
                return _fail("--by must name someone")
            done = asyncio.run(revoke(resolved, args.grant_id, by=by, out=sys.stdout))
            return 0 if done else EXIT_CHECK_FAILED
        asyncio.run(print_grants(resolved, limit=args.limit, as_json=args.json, out=sys.stdout))
    except _Unusable as error:
        return _fail(str(error))
    except StoreError as error:
        return _fail(f"the store cannot be used: {error}")
    return 0


def _view(args: argparse.Namespace) -> int:
    from state import StoreError, UsageError

    from ._admin import print_audit, print_pending

    if args.limit < 1:
        return _fail(f"--limit must be at least 1, got {args.limit}")
    try:
        resolved = _existing_store(args.store)
    except _Unusable as error:
        return _fail(str(error))
    try:
        if args.command == "audit":
            if args.json and args.csv:
                return _fail("--json and --csv cannot be combined: pick one")
            where = _audit_filter(args)
            output: Literal["table", "json", "csv"] = (
                "json" if args.json else "csv" if args.csv else "table"
            )
            show = print_audit(
                resolved, limit=args.limit, output=output, where=where, out=sys.stdout
            )
        else:
            show = print_pending(resolved, limit=args.limit, as_json=args.json, out=sys.stdout)
        asyncio.run(show)
    except UsageError as error:
        return _fail(str(error))
    except StoreError as error:
        # Only `state` sees the backend's own errors: an unreachable Redis is a StoreError too.
        return _fail(f"the store cannot be used: {error}")
    return 0


def _configure_logging(settings: Settings) -> None:
    from ._logging import configure_logging

    secrets = [
        secret.get_secret_value()
        for secret in (
            settings.slack_bot_token,
            settings.slack_app_token,
            settings.slack_signing_secret,
            settings.openai_api_key,
        )
        if secret is not None
    ]
    configure_logging(
        level=settings.handback_log_level, format=settings.handback_log_format, secrets=secrets
    )


def _doctor(ref: str) -> int:
    from .slack import ConfigError, load_settings
    from .slack._doctor import diagnose

    try:
        settings = load_settings()
    except ConfigError as error:
        print(f"FAIL  settings: {error}")
        return EXIT_CHECK_FAILED
    _configure_logging(settings.model_copy(update={"handback_log_level": "ERROR"}))
    try:
        agent = load_agent(ref)
    except AgentRefError as error:
        print(f"FAIL  agent: {error}")
        return EXIT_CHECK_FAILED
    checks = asyncio.run(diagnose(settings, agent))
    for check in checks:
        print(check.line())
    failed = sum(check.status == "FAIL" for check in checks)
    print(f"{failed} check(s) failed." if failed else "Everything checked is fine.")
    return EXIT_CHECK_FAILED if failed else 0


def _run(ref: str, role: str = "all") -> int:
    from state import StoreError, UsageError

    from .slack import ConfigError, Role, load_settings, serve

    try:
        settings = load_settings(role=cast("Role", role))
    except ConfigError as error:
        return _fail(str(error))
    _configure_logging(settings)
    try:
        agent = load_agent(ref)
        asyncio.run(serve(agent, settings, role=cast("Role", role), freeze_heap=True))
    except (ConfigError, UsageError) as error:  # UsageError: a bad ref, or an agent's own store
        return _fail(str(error))
    except StoreError as error:
        return _fail(f"HANDBACK_STORE cannot be used: {error}")
    except OSError as error:
        # In HTTP mode almost always the port: in use, or not ours to bind.
        return _fail(f"cannot listen on {settings.host}:{settings.port}: {error.strerror or error}")
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
