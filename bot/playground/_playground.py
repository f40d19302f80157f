"""`Playground`: the real Slack app, a local Slack stand-in and the page, wired together.

The bot is the same `SlackBot` that `handback run` serves, in HTTP mode; only its Web API URL,
token and signing secret differ, all generated here. Without `OPENAI_API_KEY` the agent talks to
the offline demo model through its real `openai` client.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

from state import Store, StoreError, open_store

from .. import Agent
from .._model import Model, OpenAIModel
from ..slack import SlackBot, load_settings
from ..testing import OpenAICompatServer, ScriptReply
from ._demo_model import EXAMPLES, demo_reply
from ._example import EXAMPLE_PROMPTS, example_reply, is_example
from ._page import PageConfig, PageServer
from ._workspace import DEMO_PEOPLE, PlaygroundSlack

__all__ = ["APPROVERS", "OFFLINE_LABEL", "Playground"]

OFFLINE_LABEL = "offline demo model"
APPROVERS = ("U0BOB", "U0CAROL")
"""bob and carol approve; alice (who asks) and dave cannot, so refusals can be seen."""
_CHANNEL = "C0DEPLOYS"


class Playground:
    """Everything `handback dev` runs, as an async context manager; `url` is the page."""

    def __init__(
        self,
        agent: Agent,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        store_url: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.agent = agent
        example = is_example(agent)
        self.script: Callable[[Sequence[dict[str, Any]]], ScriptReply] = (
            example_reply if example else demo_reply
        )
        """What the offline demo model plays: the example MCP server's script for an agent
        that runs it (`bot/playground/_example.py`), else the chat-ops one."""
        self.examples: tuple[str, ...] = EXAMPLE_PROMPTS if example else EXAMPLES
        self.host = host
        self.port = port
        self.store_url = store_url
        """None keeps runs in an SQLite file in a temporary folder, removed on exit."""
        env = os.environ if environ is None else environ
        self.offline = not env.get("OPENAI_API_KEY") and isinstance(agent.model, OpenAIModel)
        """True when the offline demo model answers instead of the agent's own model."""
        self.model_label = OFFLINE_LABEL if self.offline else _label(agent.model, env)
        self.store_in_use: str | None = None
        """The store URL once started (the temporary file's when `store_url` is None), so that
        `handback audit --store URL` can read what the playground did."""
        self.slack: PlaygroundSlack | None = None
        self.bot: SlackBot | None = None
        self.page: PageServer | None = None
        self.demo: OpenAICompatServer | None = None
        self._stack: AsyncExitStack | None = None

    @property
    def url(self) -> str:
        if self.page is None:
            raise RuntimeError("the playground is not started")
        return self.page.url

    async def __aenter__(self) -> Playground:
        if self._stack is not None:
            raise RuntimeError("this Playground is already started")
        stack = AsyncExitStack()
        self._stack = stack
        try:
            await self._start(stack)
        except BaseException:
            await stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._stack is not None:
            await self._stack.aclose()

    async def _start(self, stack: AsyncExitStack) -> None:
        agent = self.agent
        saved_model, saved_store = agent.model, agent.store

        def restore() -> None:
            # The agent object may be a module global that outlives the playground.
            agent.model, agent.store = saved_model, saved_store

        stack.callback(restore)
        if self.offline:
            from openai import AsyncOpenAI

            self.demo = await stack.enter_async_context(
                OpenAICompatServer(self.script, model="offline-demo")
            )
            client = AsyncOpenAI(base_url=self.demo.base_url, api_key="offline-demo")
            stack.push_async_callback(client.close)
            agent.model = OpenAIModel(agent.model.name, client=client)

        slack = PlaygroundSlack(
            signing_secret=secrets.token_hex(16),
            bot_token=f"xoxb-playground-{secrets.token_hex(8)}",
            agent_view=True,
        )
        self.slack = await stack.enter_async_context(slack)
        store_url = self.store_url
        if store_url is None:
            try:
                folder = tempfile.mkdtemp(prefix="handback-playground-")
            except OSError as error:
                # `handback dev` would otherwise blame the port for any OSError.
                raise StoreError(
                    f"cannot create a temporary folder for the playground's store: {error}"
                ) from error
            stack.callback(shutil.rmtree, folder, True)
            store_url = f"sqlite:///{Path(folder) / 'playground.db'}"
        store: Store = await stack.enter_async_context(open_store(store_url))
        self.store_in_use = store_url
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_app_token=None,
            slack_api_url=slack.api_url,
            handback_store=store_url,
            handback_approvers=list(APPROVERS),
            handback_tool_approvers={},
            handback_answerers=[],
            handback_allow_self_approval=False,
        )
        # The agent's MCP sessions close after the bot, as in `serve()`.
        await stack.enter_async_context(agent.toolsets_open())
        self.bot = await stack.enter_async_context(
            SlackBot(agent=agent, store=store, settings=settings)
        )
        slack.bot_url = await stack.enter_async_context(self.bot.serve_http("127.0.0.1", 0))
        config = PageConfig(
            model_label=self.model_label,
            offline=self.offline,
            people=DEMO_PEOPLE,
            channel=_CHANNEL,
            examples=self.examples
            if self.offline or agent.name == "chatops" or self.examples is EXAMPLE_PROMPTS
            else (),
        )
        self.page = await stack.enter_async_context(
            PageServer(slack, config, host=self.host, port=self.port)
        )


def _label(model: Model, env: Mapping[str, str]) -> str:
    if not isinstance(model, OpenAIModel):
        return f"model: {model.name}"
    base = env.get("OPENAI_BASE_URL")
    return f"model: {model.name}" + (f" at {base}" if base else " (OpenAI)")
