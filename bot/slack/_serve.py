"""Running the Slack app as a process: logging, the store, Socket Mode or HTTP, clean shutdown."""

from __future__ import annotations

import asyncio
import logging
import signal

from state import open_store

from .. import Agent
from .._model import OpenAIModel
from ._app import SlackBot
from ._settings import ConfigError, Settings

__all__ = ["check_agent", "serve"]

log = logging.getLogger("handback.slack")


def check_agent(agent: Agent, settings: Settings) -> None:
    """Configuration the agent itself needs, checked before anything connects."""
    if isinstance(agent.model, OpenAIModel) and settings.openai_api_key is None:
        raise ConfigError(
            f"OPENAI_API_KEY is missing (agent `{agent.name}` uses model "
            f"`openai/{agent.model.name}`)"
        )


async def serve(agent: Agent, settings: Settings) -> None:
    """Serve until SIGINT or SIGTERM; work already started finishes before the process exits."""
    check_agent(agent, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with (
        open_store(settings.handback_store) as store,
        SlackBot(agent=agent, store=store, settings=settings) as bot,
    ):
        if settings.slack_app_token is not None:
            log.info("agent %s connecting over Socket Mode", agent.name)
            await bot.run_socket_mode(settings.slack_app_token.get_secret_value(), stop)
        else:
            async with bot.serve_http(settings.host, settings.port) as url:
                log.info("agent %s listening on %s", agent.name, url)
                await stop.wait()
        log.info("shutting down")
