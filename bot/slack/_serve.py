"""Running the Slack app as a process: logging, the store, Socket Mode or HTTP, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from urllib.parse import urlsplit

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from state import open_store

from .. import Agent
from .._model import OpenAIModel
from ._app import Role, SlackBot, make_client
from ._gates import check_gates
from ._heap import freeze_startup_heap
from ._settings import ConfigError, Settings

__all__ = ["check_agent", "check_model", "check_tokens", "serve"]

log = logging.getLogger("handback.slack")

_REFUSED = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)
"""Slack's answers for a token it will never take."""


def check_agent(agent: Agent, settings: Settings) -> None:
    """Configuration the agent itself needs, checked before anything connects: its model's
    key, and an approver rule for every gated tool (`check_gates`)."""
    check_model(agent, settings)
    check_gates(agent, settings)


def check_model(agent: Agent, settings: Settings) -> None:
    """What the agent's model needs from the environment (the OpenAI key)."""
    model = agent.model
    if isinstance(model, OpenAIModel) and model.own_client and settings.openai_api_key is None:
        raise ConfigError(
            f"OPENAI_API_KEY is missing (agent `{agent.name}` uses model "
            f"`openai/{agent.model.name}`)"
        )


async def check_tokens(client: AsyncWebClient, settings: Settings) -> None:
    """Ask Slack whether it takes the tokens, so a wrong one stops start-up with one line
    instead of failing every request (or, in Socket Mode, retrying forever). Slack being out of
    reach is only logged: the bot starts and keeps trying."""
    reached = await _check("SLACK_BOT_TOKEN", client.auth_test(), settings)
    if reached and settings.slack_app_token is not None:
        app_token = settings.slack_app_token.get_secret_value()
        await _check("SLACK_APP_TOKEN", client.apps_connections_open(app_token=app_token), settings)


async def _check(name: str, call: Awaitable[object], settings: Settings) -> bool:
    """Whether Slack answered; `ConfigError` when its answer is that the token is no good."""
    try:
        await call
    except SlackApiError as error:
        code = str(error.response.get("error"))
        if code in _REFUSED:
            raise ConfigError(f"{name} was refused by Slack ({code})") from None
        log.warning("could not check %s with Slack: %s", name, code)
    except (aiohttp.ClientError, TimeoutError) as error:
        log.warning("Slack is out of reach at %s: %r", settings.slack_api_url, error)
        return False
    return True


async def serve(
    agent: Agent, settings: Settings, *, role: Role = "all", freeze_heap: bool = False
) -> None:
    """Serve until SIGINT or SIGTERM. Then no new work is taken; work already started has
    `HANDBACK_SHUTDOWN_GRACE` seconds to finish, and what is left goes back to the inbox.

    `freeze_heap=True` (what the CLI passes, the process being all ours) freezes the objects
    alive once the app is built out of the garbage collector's full passes (`_heap.py`); a
    program that embeds the bot keeps its collector as it set it."""
    check_agent(agent, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    client = make_client(settings)
    if settings.slack_app_token is not None:
        await check_tokens(client, settings)
    async with (
        # MCP sessions first: they close after the bot, whose work may call them in its grace.
        agent.toolsets_open(),
        open_store(settings.handback_store) as store,
        SlackBot(agent=agent, store=store, settings=settings, client=client, role=role) as bot,
        AsyncExitStack() as extra,
    ):
        if freeze_heap:
            freeze_startup_heap()
        if settings.handback_metrics_port is not None:
            url = await extra.enter_async_context(
                bot.serve_http(settings.host, settings.handback_metrics_port, health_only=True)
            )
            log.info("metrics on %s:%s/metrics", settings.host, _port_of(url))
        if role == "worker":
            # No Slack endpoint and no Socket Mode: /healthz and /metrics, for the orchestrator.
            async with bot.serve_http(settings.host, settings.port, health_only=True) as url:
                log.info(
                    "agent %s working the inbox; /healthz and /metrics on %s:%s",
                    agent.name,
                    settings.host,
                    _port_of(url),
                )
                await stop.wait()
        elif settings.slack_app_token is not None:
            log.info("agent %s connecting over Socket Mode", agent.name)
            await bot.run_socket_mode(settings.slack_app_token.get_secret_value(), stop)
        else:
            async with bot.serve_http(settings.host, settings.port) as url:
                # After the bind, so a port in use is reported before anything else.
                await check_tokens(client, settings)
                log.info(
                    "agent %s listening on %s:%s (Slack's Request URL path is /slack/events)",
                    agent.name,
                    settings.host,
                    _port_of(url),
                )
                await stop.wait()
        log.info("shutting down")


def _port_of(url: str) -> int | None:
    """The port a `serve_http()` URL names: the one actually bound (PORT may be 0)."""
    return urlsplit(url).port
