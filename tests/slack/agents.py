"""Agents on scripted models for the Slack tests; also served by a real `handback run` process."""

from __future__ import annotations

import json
from typing import Any

from bot import Agent, Tool, suspend
from bot.testing import FunctionModel
from bot.tools import ask_user, ask_user_multi, confirm

DEPLOYS: list[dict[str, str]] = []
"""What the pretend `deploy` tool did, so tests can see whether it ran."""


def deploy(service: str, environment: str) -> str:
    """Deploy a service."""
    DEPLOYS.append({"service": service, "environment": environment})
    return f"deployed {service} to {environment}"


def _last(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return messages[-1]


def _users(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["content"]) for m in messages if m["role"] == "user"]


def _tool_call(name: str, **arguments: Any) -> list[dict[str, Any]]:
    return [{"name": name, "arguments": arguments}]


def _script(first_call: list[dict[str, Any]]) -> FunctionModel:
    """A model that makes `first_call` for each new prompt and then reports the tool result."""

    def respond(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        last = _last(messages)
        if last["role"] == "tool":
            return f"Tool said: {last['content']}"
        return first_call

    return FunctionModel(respond)


approval_agent = Agent(
    name="approver",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[Tool(deploy, requires_approval=True)],
)

confirm_agent = Agent(
    name="confirmer",
    model=_script(_tool_call("confirm", action="Restart api in prod?")),
    tools=[confirm],
)

select_agent = Agent(
    name="chooser",
    model=_script(
        _tool_call("ask_user", question="Which environment?", options=["dev", "staging", "prod"])
    ),
    tools=[ask_user],
)

many_options = [f"service-{n:03d}" for n in range(30)]
big_select_agent = Agent(
    name="big-chooser",
    model=_script(_tool_call("ask_user", question="Which service?", options=many_options)),
    tools=[ask_user],
)

multi_agent = Agent(
    name="multi",
    model=_script(
        _tool_call("ask_user_multi", question="Which services?", options=["api", "web", "worker"])
    ),
    tools=[ask_user_multi],
)

free_text_agent = Agent(
    name="asker",
    model=_script(_tool_call("ask_user", question="What should the release be called?")),
    tools=[ask_user],
)


def pick_replicas() -> str:
    """Ask how many replicas to run."""
    count = suspend(
        {"question": "How many replicas?"},
        kind="ask_user",
        response_schema={"type": "integer", "minimum": 1, "maximum": 10},
    )
    return f"replicas={count}"


typed_agent = Agent(
    name="typed",
    model=_script(_tool_call("pick_replicas")),
    tools=[pick_replicas],
)


def _memory(messages: list[dict[str, Any]]) -> str:
    # Echoes every user message of the transcript, so a test can see the thread is remembered.
    return "I have heard: " + " | ".join(_users(messages))


memory_agent = Agent(name="memory", model=FunctionModel(_memory), tools=[])


def _two_questions(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = _last(messages)
    if last["role"] == "user":
        return [
            {"name": "confirm", "arguments": {"action": "first"}},
            {"name": "confirm", "arguments": {"action": "second"}},
        ]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    return "Both: " + json.dumps(results)


two_question_agent = Agent(
    name="two-questions", model=FunctionModel(_two_questions), tools=[confirm]
)

huge_options = [f"host-{n:03d}" for n in range(150)]
huge_select_agent = Agent(
    name="huge-chooser",
    model=_script(_tool_call("ask_user", question="Which host?", options=huge_options)),
    tools=[ask_user],
)


def _broken(messages: list[dict[str, Any]]) -> str:
    raise RuntimeError("the model server fell over at /srv/secret/path")


broken_agent = Agent(name="broken", model=FunctionModel(_broken), tools=[])


def _deploy_or_recall(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = _last(messages)
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    if str(last["content"]).startswith("deploy"):
        return _tool_call("deploy", service="api", environment="prod")
    return _memory(messages)


recall_agent = Agent(
    name="recaller",
    model=FunctionModel(_deploy_or_recall),
    tools=[Tool(deploy, requires_approval=True)],
)
"""Deploys behind an approval when asked to deploy; otherwise says what it heard in the thread."""
