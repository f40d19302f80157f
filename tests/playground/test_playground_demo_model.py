"""The offline demo model plays the chat-ops scenarios through the runtime and `openai`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from bot import Agent, Cancel, OpenAIModel, chatops
from bot.events import InteractionEvent, OutputEvent
from bot.playground import EXAMPLES, demo_reply
from bot.testing import OpenAICompatServer
from state import open_store

RECENT_VERSIONS = ["2.3", "2.2.1", "2.2", "2.1.4", "2.1", "2.0.1", "1.4.2", "1.4.1"]
"""The versions the demo's version question offers, in its order."""


@dataclass(kw_only=True)
class Turn:
    output: OutputEvent
    interactions: list[InteractionEvent]

    @property
    def only(self) -> InteractionEvent:
        assert len(self.interactions) == 1, self.interactions
        return self.interactions[0]


class Chat:
    """The chat-ops agent on the demo model, served over HTTP like a hosted model."""

    def __init__(self, agent: Agent, server: OpenAICompatServer) -> None:
        self.agent = agent
        self.server = server

    async def say(self, prompt: str) -> Turn:
        return await self._turn(self.agent(prompt=prompt))

    async def answer(self, turn: Turn, value: Any) -> Turn:
        resume = {turn.only.interaction_id: value}
        return await self._turn(self.agent(parent_id=turn.output.run_id, resume=resume))

    async def _turn(self, run: Any) -> Turn:
        interactions: list[InteractionEvent] = []
        output: OutputEvent | None = None
        async for event in run:
            if isinstance(event, InteractionEvent):
                interactions.append(event)
            elif isinstance(event, OutputEvent) and event.path == self.agent.name:
                output = event
        assert output is not None
        return Turn(output=output, interactions=interactions)


@pytest.fixture
async def chat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Chat]:
    monkeypatch.setattr(chatops, "fleet", chatops.Fleet.fresh())
    async with (
        OpenAICompatServer(demo_reply) as server,
        open_store(f"sqlite:///{tmp_path / 'demo.db'}") as store,
    ):
        client = AsyncOpenAI(base_url=server.base_url, api_key="offline-demo")
        agent = Agent(
            name="chatops",
            model=OpenAIModel("offline-demo", client=client),
            system_prompt=chatops.SYSTEM_PROMPT,
            tools=list(chatops.agent.tools.values()),
            store=store,
        )
        yield Chat(agent, server)
        await client.close()


async def test_deploy_waits_for_approval_then_reports(chat: Chat) -> None:
    turn = await chat.say("<@U0HANDBACK> deploy api 2.3 to prod")
    assert turn.output.status.reason == "input_required"
    assert turn.only.kind == "approval"
    assert turn.only.payload["tool"] == "deploy"
    assert turn.only.payload["arguments"] == {
        "service": "api",
        "version": "2.3",
        "environment": "prod",
    }
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"

    done = await chat.answer(turn, True)
    assert done.output.status.code == "success"
    assert "Deployed api 2.3 to prod (was 1.4.2)" in str(done.output.output)
    assert chatops.fleet.versions[("api", "prod")] == "2.3"


async def test_denied_deploy_says_so_with_the_reason(chat: Chat) -> None:
    turn = await chat.say("deploy api 2.3 to prod")
    done = await chat.answer(turn, {"approved": False, "reason": "freeze until Monday"})
    assert done.output.status.code == "success"
    assert "did *not* deploy api 2.3 to prod" in str(done.output.output)
    assert "freeze until Monday" in str(done.output.output)
    assert chatops.fleet.versions[("api", "prod")] == "1.4.2"


async def test_bare_deploy_asks_service_environment_then_version_from_a_list(chat: Chat) -> None:
    turn = await chat.say("deploy")
    assert turn.only.kind == "ask_user"
    assert turn.only.payload["options"] == ["api", "web", "worker"]
    turn = await chat.answer(turn, "web")
    assert turn.only.payload["question"].startswith("Which environment")
    assert turn.only.payload["options"] == ["dev", "staging", "prod"]
    turn = await chat.answer(turn, "staging")
    assert turn.only.payload["question"] == "Which version of web should go to staging?"
    # More options than fit as buttons, so the card shows a select.
    assert turn.only.payload["options"] == RECENT_VERSIONS
    assert len(RECENT_VERSIONS) > 5
    turn = await chat.answer(turn, "2.2.1")
    assert turn.only.kind == "approval"
    assert turn.only.payload["arguments"] == {
        "service": "web",
        "version": "2.2.1",
        "environment": "staging",
    }
    done = await chat.answer(turn, True)
    assert "Deployed web 2.2.1 to staging" in str(done.output.output)


async def test_restart_goes_through_confirm(chat: Chat) -> None:
    turn = await chat.say("restart worker in prod")
    assert turn.only.kind == "confirm"
    assert turn.only.payload == {"action": "Restart worker in prod?"}
    done = await chat.answer(turn, True)
    assert done.output.output == "Restarted worker in prod."
    assert chatops.fleet.restarts[("worker", "prod")] == 1


async def test_restart_called_off(chat: Chat) -> None:
    turn = await chat.say("please restart the api in staging")
    done = await chat.answer(turn, False)
    assert done.output.output == "Restart of api in staging was called off."
    assert chatops.fleet.restarts == {}


async def test_services_are_picked_with_ask_user_multi(chat: Chat) -> None:
    turn = await chat.say("check some services")
    assert turn.only.kind == "ask_user_multi"
    assert turn.only.payload["options"] == ["api", "web", "worker"]
    done = await chat.answer(turn, ["api", "worker"])
    text = str(done.output.output)
    assert "You picked *api*, *worker*" in text
    assert "prod: api 1.4.2, worker 0.9.7" in text
    assert "web 2.0.1" not in text


async def test_free_text_question_has_no_options(chat: Chat) -> None:
    turn = await chat.say("write a release note")
    assert turn.only.kind == "ask_user"
    assert turn.only.payload["options"] is None
    done = await chat.answer(turn, "Faster deploys & fewer <bugs>")
    assert "Faster deploys & fewer <bugs>" in str(done.output.output)


async def test_status_and_help(chat: Chat) -> None:
    status = await chat.say("status of prod")
    assert status.interactions == []
    assert "prod: api 1.4.2, web 2.0.1, worker 0.9.7" in str(status.output.output)
    assert "staging" not in str(status.output.output)
    help_turn = await chat.say("hello there")
    assert help_turn.interactions == []
    for example in EXAMPLES:
        assert f"`{example}`" in str(help_turn.output.output)


async def test_cancel_ends_the_run_without_asking_the_model_again(chat: Chat) -> None:
    turn = await chat.say("deploy")
    asked = len(chat.server.requests)
    done = await chat.answer(turn, Cancel("never mind"))
    assert done.output.status.code == "cancelled"
    assert len(chat.server.requests) == asked


def test_every_example_starts_a_scenario_or_is_the_help() -> None:
    for example in EXAMPLES:
        reply = demo_reply([{"role": "user", "content": example}])
        assert isinstance(reply, list), example
        json.dumps(reply)


def test_only_messages_since_the_last_user_turn_count() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "deploy api 2.3 to prod"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "deploy", "arguments": json.dumps({"service": "api"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Deployed api 2.3 to prod (was 1.4.2)."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "now restart it"},
    ]
    reply = demo_reply(history)
    assert isinstance(reply, list)
    assert reply[0]["name"] == "ask_user"
    assert reply[0]["arguments"]["question"] == "Which service should I restart?"


ODD_TEXTS = {
    "empty": "",
    "whitespace": " \n\t ",
    "emoji": "🚀🔥🙂",
    "emoji-deploy": "🚀 deploy 🚀",
    "10k": "x" * 10_000,
    "10k-deploy": "please deploy " + "and " * 2_500 + "api",
    "many-dots": "deploy v" + "1." * 20_000,
    "angles": "<" * 40_000,
    "nul": "\x00deploy\x00",
    "rtl": "\u202edeploy api to prod",
}


@pytest.mark.parametrize("name", ODD_TEXTS)
def test_the_demo_model_answers_any_text(name: str) -> None:
    reply = demo_reply([{"role": "user", "content": ODD_TEXTS[name]}])
    assert reply
    if isinstance(reply, str):
        assert "offline demo model" in reply
    else:
        assert reply[0]["name"] in ("ask_user", "deploy")


@pytest.mark.parametrize(
    "history",
    [
        [{"role": "assistant", "tool_calls": [{"id": "1", "function": None}]}],
        [{"role": "assistant", "tool_calls": [{"id": "1", "function": {"arguments": "[1, 2]"}}]}],
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "1", "function": {"name": "ask_user", "arguments": '"question"'}}
                ],
            },
            {"role": "tool", "tool_call_id": "1", "content": "api"},
        ],
        [{"role": "assistant", "tool_calls": ["not a call", None]}],
        [{"role": "tool", "tool_call_id": None, "content": None}],
    ],
)
def test_the_demo_model_survives_an_odd_history(history: list[dict[str, Any]]) -> None:
    reply = demo_reply([{"role": "user", "content": "deploy"}, *history])
    assert reply
