"""Agents on scripted models for the Slack tests; also served by a real `handback run` process."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from bot import Agent, Approval, Tool, suspend
from bot.testing import FunctionModel
from bot.tools import ask_user, ask_user_multi, confirm

DEPLOYS: list[dict[str, str]] = []
"""What the pretend `deploy` tool did, so tests can see whether it ran."""


def twin(agent: Agent) -> Agent:
    """The same agent as another process would have it: its own `Agent` object, without a store
    (an app refuses an agent whose store is another app's)."""
    return Agent(
        name=agent.name,
        model=agent.model,
        tools=list(agent.tools.values()),
        system_prompt=agent.system_prompt,
        max_iterations=agent.max_iterations,
        description=agent.description,
    )


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


two_person_agent = Agent(
    name="two-person",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[Tool(deploy, requires_approval=Approval(count=2))],
)
"""Deploys only once two people other than whoever asked approved (the two-person rule)."""


def _deploy_api_then_web(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Two approvals in one turn: deploy api, then (after its result) deploy web."""
    results = [m for m in messages if m["role"] == "tool"]
    last = _last(messages)
    if last["role"] != "tool":
        return _tool_call("deploy", service="api", environment="prod")
    if len(results) == 1:
        return _tool_call("deploy", service="web", environment="prod")
    return f"Tool said: {last['content']}"


double_deploy_agent = Agent(
    name="double_deployer",
    model=FunctionModel(_deploy_api_then_web),
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


# ---------------------------------------------------------------- durable execution (issue 8)
# The tools below run in real `handback run` processes. Each appends a line to a marker file in
# the directory `HBTEST_DIR` names, so a test counts executions across processes and restarts;
# `kill-<tool>` in that directory makes the tool SIGKILL its own process once (the file is
# removed first), and `slow` waits for a `release` file.


def _marks() -> Path:
    return Path(os.environ.get("HBTEST_DIR") or ".")


def _executed(tool: str, detail: str) -> None:
    with (_marks() / f"{tool}.log").open("a") as log:
        log.write(f"{os.getpid()} {detail}\n")


def _die_if_armed(tool: str) -> None:
    try:
        (_marks() / f"kill-{tool}").unlink()
    except FileNotFoundError:
        return
    os.kill(os.getpid(), signal.SIGKILL)


def durable_deploy(service: str, environment: str) -> str:
    """Deploy a service."""
    _executed("deploy", f"{service} {environment}")
    _die_if_armed("deploy")
    return f"deployed {service} to {environment}"


def lookup(service: str) -> str:
    """Look up a service's version."""
    _executed("lookup", service)
    _die_if_armed("lookup")
    return f"{service} runs 2.3"


async def slow(service: str) -> str:
    """Restart a service, slowly."""
    _executed("slow", f"start {service}")
    release = _marks() / "release"
    for _ in range(3000):  # 60 s at most
        if release.exists():
            break
        await asyncio.sleep(0.02)
    _executed("slow", f"end {service}")
    return f"restarted {service}"


def slow_sync(service: str) -> str:
    """Restart a service, slowly, blocking (so it runs in a worker thread)."""
    _executed("slow", f"start {service}")
    release = _marks() / "release"
    for _ in range(3000):  # 60 s at most
        if release.exists():
            break
        time.sleep(0.02)
    _executed("slow", f"end {service}")
    return f"restarted {service}"


def name_release(version: str) -> str:
    """Name a release; a person is asked for the name first."""
    name = suspend(
        {"question": f"What should release {version} be called?"},
        kind="ask_user",
        response_schema={"type": "string", "minLength": 1},
    )
    _executed("name_release", f"{version} {name}")
    _die_if_armed("name_release")
    return f"release {version} is called {name}"


def _durable_script(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = _last(messages)
    if last["role"] == "tool":
        return f"Tool said: {last['content']}"
    verb, _, rest = str(last["content"]).partition(" ")
    service = rest.split()[0] if rest.split() else "api"
    if verb == "deploy":
        return _tool_call("deploy", service=service, environment="prod")
    if verb == "lookup":
        return _tool_call("lookup", service=service)
    if verb == "slow":
        return _tool_call("slow", service=service)
    if verb == "blocking":
        return _tool_call("slow_sync", service=service)
    if verb == "rollout":
        return _tool_call("rollout", service=service, environment="prod")
    if verb == "name":
        return _tool_call("name_release", version=service)
    return _memory(messages)


async def _pondering_script(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """`ponder …` is a slow model call: it waits for the `release` file (60 s at most)."""
    last = _last(messages)
    if last["role"] == "user" and str(last["content"]).startswith("ponder"):
        _executed("ponder", "start")
        release = _marks() / "release"
        for _ in range(3000):
            if release.exists():
                break
            await asyncio.sleep(0.02)
        _executed("ponder", "end")
        return "pondered"
    return _durable_script(messages)


durable_agent = Agent(
    name="durable",
    model=FunctionModel(_pondering_script),
    tools=[
        Tool(durable_deploy, name="deploy", requires_approval=True),
        lookup,
        slow,
        slow_sync,
        name_release,
    ],
)
"""`deploy …` asks to approve a deploy, `lookup …`, `slow …` and `blocking …` (a sync `slow`)
run a tool without asking, `ponder …` is a slow model call,
`name …` asks a question answered by a thread reply, then acts on it; anything else is
answered with what the thread said so far."""


durable_two_person_agent = Agent(
    name="durable-two-person",
    model=FunctionModel(_durable_script),
    tools=[Tool(durable_deploy, name="deploy", requires_approval=Approval(count=2)), lookup],
)
"""`durable_agent`'s script, its deploy needing two approvers other than whoever asked (the
two-person rule); each deploy writes its marker line, so a test counts them across processes."""


class _SameCallIds:
    """A model that names every tool call `call_0`, as some OpenAI-compatible servers do."""

    def __init__(self, inner: FunctionModel) -> None:
        self.inner = inner
        self.name = inner.name

    async def respond(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, stream: bool
    ) -> AsyncIterator[Any]:
        async for item in self.inner.respond(messages, tools, stream=stream):
            if not isinstance(item, str):
                item.tool_calls = [
                    dataclasses.replace(call, id="call_0") for call in item.tool_calls
                ]
            yield item


call_0_agent = Agent(
    name="call-zero",
    model=_SameCallIds(FunctionModel(_durable_script)),
    tools=[Tool(durable_deploy, name="deploy", requires_approval=True), lookup, slow],
)
"""`durable_agent` behind a model whose tool calls all carry the id `call_0`."""


def _ask_then_do(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    last = _last(messages)
    if last["role"] == "user":
        return _tool_call("ask_user", question="What should I do?")
    if "deploy" in str(last["content"]) and not str(last["content"]).startswith("deployed"):
        return _tool_call("deploy", service="api", environment="prod")
    return f"Tool said: {last['content']}"


laundering_agent = Agent(
    name="ask-then-do",
    model=FunctionModel(_ask_then_do),
    tools=[ask_user, Tool(deploy, requires_approval=True)],
)
"""Asks what to do for every message, and deploys (behind an approval) when the answer says
"deploy": the shape of four-eyes laundering, where whoever answers steers the model."""


grant_agent = Agent(
    name="granter",
    model=_script(_tool_call("deploy", service="api", environment="dev")),
    tools=[Tool(deploy, requires_approval=Approval(grants=("thread", "channel"), grant_ttl=3600))],
)
"""Deploys (behind an approval whose approver may grant the thread or the channel for an hour)
for every message."""


# Reminders, escalation and approvals checked again at resume (tests/slack/test_reminders.py).

REMIND_RULE = Approval(
    approvers=["S0OPS"], remind_after=300, escalate_to=["U0DAVE"], escalate_after=600
)

reminding_agent = Agent(
    name="reminding",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[Tool(deploy, requires_approval=REMIND_RULE)],
)

dm_reminding_agent = Agent(
    name="dm_reminding",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[
        Tool(
            deploy,
            requires_approval=Approval(
                approvers=["U0BOB", "S0OPS"], remind_after=300, escalate_to=["U0DAVE"]
            ),
        )
    ],
)


def _deploy_api_and_web(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Two approvals pending at once: both deploys in one step."""
    last = _last(messages)
    if last["role"] == "tool":
        results = [str(m["content"]) for m in messages if m["role"] == "tool"]
        return "Tool said: " + "; ".join(results)
    return [
        {"name": "deploy", "arguments": {"service": "api", "environment": "prod"}},
        {"name": "deploy", "arguments": {"service": "web", "environment": "prod"}},
    ]


group_approved_agent = Agent(
    name="group_approved",
    model=FunctionModel(_deploy_api_and_web),
    tools=[Tool(deploy, requires_approval=Approval(approvers=["S0OPS"]))],
)

two_person_group_agent = Agent(
    name="two_person_group",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[Tool(deploy, requires_approval=Approval(approvers=["S0OPS"], count=2))],
)
"""Deploys once two members of the user group S0OPS approved."""

two_person_group_pair_agent = Agent(
    name="two_person_group_pair",
    model=FunctionModel(_deploy_api_and_web),
    tools=[Tool(deploy, requires_approval=Approval(approvers=["S0OPS"], count=2))],
)
"""Two deploys pending at once, each needing two members of S0OPS: the last vote on one of them
does not claim the run (it waits for the other), so the run resumes the long way."""

quick_reminding_agent = Agent(
    name="quick_reminding",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[
        Tool(
            deploy,
            requires_approval=Approval(
                approvers=["S0OPS"], remind_after=2, escalate_to=["U0DAVE"], escalate_after=2
            ),
        )
    ],
)
"""Reminded after 2 s and escalated 2 s later, by the real clock of `handback run` processes."""

unnamed_reminding_agent = Agent(
    name="unnamed_reminding",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[Tool(deploy, requires_approval=Approval(remind_after=300))],
)
"""Names no approver (anyone in the channel but the requester may approve)."""


SECRET_VALUE = "hunter2-do-not-show"


def set_password(service: str, password: str) -> str:
    """Set a service's password."""
    return f"password of {service} set"


secret_agent = Agent(
    name="secret",
    model=_script(_tool_call("set_password", service="db", password=SECRET_VALUE)),
    tools=[Tool(set_password, requires_approval=True)],
)
"""An approval whose arguments hold a secret-looking value (shown nowhere)."""


two_person_reminding_agent = Agent(
    name="two_person_reminding",
    model=_script(_tool_call("deploy", service="api", environment="prod")),
    tools=[
        Tool(
            deploy,
            requires_approval=Approval(
                approvers=["S0OPS"], count=2, remind_after=300, escalate_to=["U0DAVE"]
            ),
        )
    ],
)
"""The two-person rule with reminders: the escalation counts the votes already given."""


async def steady_deploy(service: str, environment: str) -> str:
    """Deploy a service; its line is written first, then it runs for `STEADY_S` seconds."""
    _executed("deploy", f"{service} {environment}")
    await asyncio.sleep(STEADY_S)
    return f"deployed {service} to {environment}"


def steady_rollout(service: str, environment: str) -> str:
    """Deploy a service from a thread: `steady_deploy` as a sync handler, with the same line."""
    _executed("deploy", f"{service} {environment}")
    time.sleep(STEADY_S)
    return f"deployed {service} to {environment}"


STEADY_S = 0.3
"""How long `steady_deploy` runs after writing its line: a window a kill can land in."""

steady_agent = Agent(
    name="steady",
    model=FunctionModel(_durable_script),
    tools=[
        Tool(steady_deploy, name="deploy", requires_approval=True),
        Tool(steady_rollout, name="rollout", requires_approval=True),
    ],
)
"""`deploy <service>` asks to approve a deploy that writes its line, then runs for 0.3 s (the
kill -9 tests of tests/slack/test_durable_kills.py kill it at chosen moments); `rollout
<service>` does the same in a sync handler (its thread)."""
