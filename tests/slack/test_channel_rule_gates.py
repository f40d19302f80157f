"""A channel's own rule is a gate like any other: `handback run` refuses to start when nobody
could give it there, and names the tool; a rule someone can give starts."""

from __future__ import annotations

from typing import Any

import pytest

from bot import Agent, Approval, Tool
from bot.slack import ConfigError, Settings, check_agent, load_settings
from bot.testing import FunctionModel


def _settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": "xoxb-test",
        "slack_signing_secret": "secret",
        "slack_app_token": None,
        "handback_store": "sqlite:///unused.db",
        "handback_approvers": [],
        "handback_tool_approvers": {},
        "handback_answerers": [],
        "handback_allow_self_approval": False,
    }
    values.update(overrides)
    return load_settings(**values)


def deploy(service: str) -> str:
    """Deploy a service."""
    return f"deployed {service}"


def _agent(rule: bool | Approval) -> Agent:
    return Agent(
        name="ops",
        model=FunctionModel(lambda messages: "ok"),
        tools=[Tool(deploy, requires_approval=Approval(approvers=["U0BOB"]))],
        channel_rules={"C0PROD": {"deploy": rule}},
    )


def test_a_channel_rule_nobody_can_give_stops_the_start() -> None:
    # The tool's own rule names bob; in C0PROD it is `True`, with no approvers anywhere.
    with pytest.raises(ConfigError, match="nobody may approve `deploy`"):
        check_agent(_agent(True), _settings())


def test_a_channel_rule_someone_can_give_starts() -> None:
    check_agent(_agent(Approval(approvers=["S0LEADS"], count=2)), _settings())
    check_agent(_agent(True), _settings(handback_approvers=["U0CAROL"]))
