"""The built-in example: a chat-ops agent acting on a pretend, in-memory fleet.

Nothing here touches a real system, so it is safe to run anywhere. `handback run` with no
argument serves `bot.chatops:agent`. The tool and argument names are stable (the playground's
offline demo model scripts them):

- `deploy(service, version, environment)`: needs an approval before any of it runs
  (`deploy_approval`): two distinct approvers for prod, with a reminder and an escalation to dave;
  one elsewhere, who may edit the arguments first or grant the rest of the thread.
- `restart(service, environment)`: asks `confirm` first.
- `fleet_status(environment=None)`: what runs where.
- `ask_user(question, options=None)`, `ask_user_multi(question, options)`, `confirm(action)`.

Services are `api`, `web`, `worker`; environments `dev`, `staging`, `prod`. The model comes from
`HANDBACK_MODEL` (default `openai/gpt-4o-mini`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from . import Agent, Approval, Tool
from .tools import ask_user, ask_user_multi, confirm

__all__ = [
    "ENVIRONMENTS",
    "SERVICES",
    "Environment",
    "Fleet",
    "Service",
    "agent",
    "deploy",
    "deploy_approval",
    "fleet",
    "fleet_status",
    "restart",
]

Service = Literal["api", "web", "worker"]
Environment = Literal["dev", "staging", "prod"]
SERVICES: tuple[Service, ...] = ("api", "web", "worker")
ENVIRONMENTS: tuple[Environment, ...] = ("dev", "staging", "prod")

SYSTEM_PROMPT = """You are handback, a chat-ops assistant in Slack for a small fleet.
Services: api, web, worker. Environments: dev, staging, prod.
Use fleet_status to see what runs where. Use deploy to roll a version out and restart to restart
a service; both are real changes, so never guess: when the service, version or environment is
unclear, ask with ask_user (give options when there are a few choices) or ask_user_multi when
several may be picked. Keep answers short and say what changed."""


@dataclass(kw_only=True)
class Fleet:
    """The pretend fleet: which version of each service runs in each environment."""

    versions: dict[tuple[str, str], str] = field(default_factory=dict)
    restarts: dict[tuple[str, str], int] = field(default_factory=dict)

    @classmethod
    def fresh(cls) -> Fleet:
        base = {"api": "1.4.2", "web": "2.0.1", "worker": "0.9.7"}
        return cls(versions={(s, e): base[s] for s in SERVICES for e in ENVIRONMENTS})


fleet = Fleet.fresh()
"""The module's fleet; tests may replace it with `Fleet.fresh()`."""


def deploy(service: Service, version: str, environment: Environment) -> str:
    """Deploy `version` of `service` to `environment`. Needs an approval first."""
    previous = fleet.versions[(service, environment)]
    fleet.versions[(service, environment)] = version
    return f"Deployed {service} {version} to {environment} (was {previous})."


PROD_APPROVAL = Approval(count=2, remind_after=300, escalate_to=["U0DAVE"], escalate_after=300)
"""prod: two-person rule; if nobody answers, the approvers are reminded after five minutes and
dave (the playground's fourth person) may approve five minutes later."""
OTHER_APPROVAL = Approval(editable=True, grants=("thread",), grant_ttl=3600)
"""dev and staging: one approver, who may grant the thread for an hour."""


def deploy_approval(service: Service, version: str, environment: Environment) -> Approval:
    """The rule a deploy is approved under: stricter for prod."""
    return PROD_APPROVAL if environment == "prod" else OTHER_APPROVAL


def restart(service: Service, environment: Environment) -> str:
    """Restart `service` in `environment` after the user confirms."""
    if not confirm(f"Restart {service} in {environment}?"):
        return f"Restart of {service} in {environment} was called off."
    key = (service, environment)
    fleet.restarts[key] = fleet.restarts.get(key, 0) + 1
    return f"Restarted {service} in {environment}."


def fleet_status(environment: Environment | None = None) -> str:
    """What version of each service runs, in one environment or all of them."""
    wanted = ENVIRONMENTS if environment is None else (environment,)
    lines = [
        f"{env}: " + ", ".join(f"{s} {fleet.versions[(s, env)]}" for s in SERVICES)
        for env in wanted
    ]
    return "\n".join(lines)


agent = Agent(
    name="chatops",
    model=os.environ.get("HANDBACK_MODEL", "openai/gpt-4o-mini"),
    system_prompt=SYSTEM_PROMPT,
    tools=[
        Tool(deploy, requires_approval=deploy_approval, command="/deploy"),
        restart,
        fleet_status,
        ask_user,
        ask_user_multi,
        confirm,
    ],
)
