"""A nested agent in Slack: the inner agent's approval is an ordinary card in the thread, and the
outer run resumes the inner one when it is answered."""

from __future__ import annotations

from typing import Any

from blocks import ACTION_APPROVE, ACTION_DENY
from bot import Agent, Tool
from bot.testing import FunctionModel

from ..conftest import interaction_of
from .conftest import ALICE, BOB, DAVE, BotFactory


def _script(call: dict[str, Any]) -> FunctionModel:
    def respond(messages: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        return f"{last['content']}" if last["role"] == "tool" else [call]

    return FunctionModel(respond)


def _agents(ran: list[str]) -> Agent:
    def restart(service: str) -> str:
        """Restart a service."""
        ran.append(service)
        return f"restarted {service}"

    inner = Agent(
        name="sre",
        model=_script({"name": "restart", "arguments": {"service": "api"}}),
        tools=[Tool(restart, requires_approval=True)],
        description="Operates services.",
    )
    return Agent(
        name="lead",
        model=_script({"name": "sre", "arguments": {"prompt": "restart api"}}),
        tools=[inner],
    )


async def test_an_inner_approval_is_a_card_and_resumes_both_runs(make_bot: BotFactory) -> None:
    ran: list[str] = []
    async with make_bot(_agents(ran), HANDBACK_APPROVERS="S0OPS") as h:
        asked = await h.mention(ALICE, "api is stuck")
        card = h.card(asked.ts)
        assert "restart" in card.text and ran == []
        record = await h.store.get_interaction(h.interaction_id(card))
        assert record is not None and record.requester == ALICE
        assert record.payload["tool"] == "restart"
        # The card's record is the interaction the outer run saved, with where the card is.
        outer = await h.store.load_run(record.run_id)
        assert outer is not None and outer.interactions == [interaction_of(record)]
        assert (record.runnable_path, record.runnable_name) == ("lead.sre.restart", "restart")
        assert record.runnable_type == "Tool" and record.t0 > 0

        await h.click(DAVE, card.ts, ACTION_APPROVE)  # not an approver
        assert ran == []
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert ran == ["api"]
        assert h.texts(asked.ts)[-1] == "restarted api"


async def test_a_denied_inner_approval_reaches_both_models(make_bot: BotFactory) -> None:
    ran: list[str] = []
    async with make_bot(_agents(ran)) as h:
        asked = await h.mention(ALICE, "api is stuck")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_DENY)
        assert ran == [] and h.texts(asked.ts)[-1].startswith("Denied")
