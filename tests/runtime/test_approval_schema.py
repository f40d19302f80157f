"""The approval's `InteractionEvent` carries the tool's argument schema (for forms), redacted
like the arguments and left out of the interaction id."""

from __future__ import annotations

from typing import Literal

from bot import Tool
from state import Store

from .conftest import events_of, make_agent, script

CALL = {"name": "deploy", "arguments": {"service": "api"}}


async def test_the_approval_payload_carries_the_argument_schema(store: Store) -> None:
    def deploy(service: str, env: Literal["staging", "prod"] = "staging") -> str:
        return f"deployed {service} to {env}"

    tool = Tool(deploy, requires_approval=True)
    (p,), _, _ = await events_of(make_agent(store, script(CALL), [tool])(prompt="x"))
    schema = p.payload["arguments_schema"]
    assert schema == tool.parameters
    assert schema["required"] == ["service"]
    assert schema["properties"]["env"]["enum"] == ["staging", "prod"]
    saved = await store.load_run(p.run_id)
    assert saved is not None and saved.interactions[0].payload == p.payload


async def test_secret_defaults_are_redacted_in_the_schema(store: Store) -> None:
    def login(user: str, token: str = "t0ps3cret", realm: str = "corp-internal") -> str:
        return "ok"

    tool = Tool(login, requires_approval=True, redact=["realm"])
    call = {"name": "login", "arguments": {"user": "ann"}}
    (p,), _out, _ = await events_of(make_agent(store, script(call), [tool])(prompt="x"))
    properties = p.payload["arguments_schema"]["properties"]
    assert properties["token"]["default"] == "[redacted]"
    assert properties["realm"]["default"] == "[redacted]"
    assert properties["user"] == {"title": "User", "type": "string"}
    assert "t0ps3cret" not in p.model_dump_json() and "corp-internal" not in p.model_dump_json()
    assert tool.parameters["properties"]["token"]["default"] == "t0ps3cret"  # not mutated


async def test_a_schema_change_by_a_deploy_keeps_paused_approvals_answerable(
    store: Store,
) -> None:
    def deploy(service: str) -> str:
        return f"deployed {service}"

    before = make_agent(store, script(CALL), [Tool(deploy, requires_approval=True)])
    (p,), out, _ = await events_of(before(prompt="x"))

    def deploy_v2(service: Literal["api", "web"]) -> str:
        """Deploy one of our services."""
        return f"deployed {service} (v2)"

    tool = Tool(deploy_v2, name="deploy", requires_approval=True)
    assert tool.parameters != p.payload["arguments_schema"]
    after = make_agent(store, script(CALL), [tool])
    result = await after(parent_id=out.run_id, resume={p.interaction_id: True}).collect()
    assert result.output == "done: deployed api (v2)"
