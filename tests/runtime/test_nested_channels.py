"""A nested agent runs inside its caller's per-channel tool set: in a channel it is offered only
those of its tools that the caller's set offers there, and a call of another one (its model
names it anyway) is refused without running; its pause and resume keep the channel."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from bot import Agent, ModelResponse, Tool
from bot.events import InteractionEvent
from bot.testing import FunctionModel
from state import Store

from .conftest import script

SUPPORT = "C0SUPPORT"
"""Offered the agent `sre` and, inside it, only `status`."""
OPS = "C0OPS"
"""Offered `sre` with `status` and `restart`."""


class Recording(FunctionModel):
    """A scripted model that keeps the tool names of every request it was sent."""

    def __init__(self, fn: Any) -> None:
        super().__init__(fn)
        self.offered: list[set[str]] = []

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[str | ModelResponse]:
        self.offered.append({tool["function"]["name"] for tool in tools})
        async for item in super().respond(messages, tools, stream=stream):
            yield item


def _agents(store: Store, ran: list[str]) -> tuple[Agent, Recording]:
    def status() -> str:
        """Say how the services are."""
        return "all green"

    def restart(service: str) -> str:
        """Restart a service."""
        ran.append(service)
        return f"restarted {service}"

    inner_model = Recording(script({"name": "restart", "arguments": {"service": "api"}}))
    sre = Agent(
        name="sre",
        model=inner_model,
        tools=[status, Tool(restart, requires_approval=True)],
        store=store,
    )
    lead = Agent(
        name="lead",
        model=FunctionModel(script({"name": "sre", "arguments": {"prompt": "restart api"}})),
        tools=[sre],
        store=store,
        channels={SUPPORT: ["sre", "status"], OPS: ["sre", "status", "restart"]},
    )
    return lead, inner_model


async def test_the_inner_agent_is_offered_only_what_the_callers_channel_set_offers(
    store: Store,
) -> None:
    ran: list[str] = []
    lead, inner = _agents(store, ran)
    result = await lead(prompt="restart api", channel=SUPPORT).collect()
    assert inner.offered == [{"status"}, {"status"}]
    # Its model named `restart` anyway: refused like a tool it does not have, nothing ran,
    # and no approval was asked for it.
    assert "there is no tool `restart`" in str(result.output)
    assert result.status.code == "success" and ran == []


async def test_in_a_channel_that_offers_the_tool_the_inner_agent_pauses_and_runs_it_once(
    store: Store,
) -> None:
    ran: list[str] = []
    lead, inner = _agents(store, ran)
    events = [e async for e in lead(prompt="restart api", channel=OPS)]
    [approval] = [e for e in events if isinstance(e, InteractionEvent)]
    assert approval.runnable_path == "lead.sre.restart"
    assert inner.offered == [{"status", "restart"}]
    # Resumed without a channel (a worker that only knows the run): the inner run keeps OPS.
    again, _ = _agents(store, ran)
    result = await again(
        parent_id=events[-1].run_id, resume={approval.interaction_id: True}
    ).collect()
    assert result.status.code == "success", result
    assert ran == ["api"]


async def test_an_inner_agents_own_channel_sets_narrow_it_further(store: Store) -> None:
    ran: list[str] = []
    lead, inner = _agents(store, ran)
    sre = lead.tools["sre"].agent  # type: ignore[attr-defined]
    sre.channels = type(lead.channels).of({OPS: ["status"]})
    await lead(prompt="restart api", channel=OPS).collect()
    assert inner.offered[0] == {"status"}
    assert ran == []
