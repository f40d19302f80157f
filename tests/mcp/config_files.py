"""Config files for the tests: one agent with two real MCP servers (`ops_server.py` over stdio,
as `ops` and as `tix`) and a tool set for each of two playground channels."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .conftest import OPS_SERVER

DEPLOYS = "C0DEPLOYS"
"""Offered the `ops` server, all of it."""
GENERAL = "C0GENERAL"
"""Offered the `tix` server and, of `ops`, only `ops_status`."""

OPS_TOOLS = {"ops_ask", "ops_deploy", "ops_fail", "ops_grow", "ops_hang", "ops_restart"}
OPS_TOOLS |= {"ops_login", "ops_maintain", "ops_odd", "ops_pick", "ops_scale", "ops_status"}
TIX_TOOLS = {name.replace("ops_", "tix_") for name in OPS_TOOLS}


def two_servers(folder: Path, *, model: str = "openai/scripted") -> Path:
    """`handback.toml` in `folder`; the servers' call logs come from `${OPS_LOG_A}` and
    `${OPS_LOG_B}`, read from the environment when each server starts."""
    command = json.dumps([sys.executable, OPS_SERVER, "stdio"])
    text = f"""
name = "ops"
model = {json.dumps(model)}
instructions = "You run operations."

[servers.ops]
command = {command}
env = {{ OPS_LOG = "${{OPS_LOG_A}}", OPS_PID = "${{OPS_PID_A}}" }}
trust_annotations = true
approvals = {{ hang = false, restart = {{ approvers = ["S0LEADS", "U0BOB"], remind_after = 600 }} }}

[servers.tix]
command = {command}
env = {{ OPS_LOG = "${{OPS_LOG_B}}", OPS_PID = "${{OPS_PID_B}}" }}
approval = {{ count = 2, approvers = ["U0BOB", "U0CAROL"] }}

[channels.{DEPLOYS}]
tools = ["ops"]

[channels.{GENERAL}]
tools = ["tix", "ops_status"]
"""
    path = folder / "handback.toml"
    path.write_text(text)
    return path


def server_env(folder: Path) -> dict[str, str]:
    return {
        "OPS_LOG_A": str(folder / "a.log"),
        "OPS_PID_A": str(folder / "a.pid"),
        "OPS_LOG_B": str(folder / "b.log"),
        "OPS_PID_B": str(folder / "b.pid"),
    }


def calls(log: Path, tool: str) -> list[dict[str, Any]]:
    """What the server writing `log` ran of `tool`."""
    if not log.exists():
        return []
    lines = [json.loads(line) for line in log.read_text().splitlines() if line]
    return [c for c in lines if c["tool"] == tool]


def offered(request: dict[str, Any]) -> set[str]:
    """The tool names of one request the model server received."""
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


class Script:
    """The model: asked to call a tool (`call NAME`), it calls it; given a result, it says it."""

    def __call__(self, messages: list[dict[str, Any]]) -> Any:
        last = messages[-1]
        if last["role"] == "tool":
            return f"Tool said: {last['content']}"
        text = str(last["content"])
        if text.startswith("call "):
            arguments = {"service": "api", "version": "2.4"}
            return [{"name": text.removeprefix("call ").strip(), "arguments": arguments}]
        return "nothing to do"


LEADS = "S0LEADS"
"""The user group whose two members must approve `ops_deploy` in DEPLOYS (`channel_rules`)."""


def channel_rules(folder: Path, *, model: str = "openai/scripted") -> Path:
    """`handback.toml` in `folder`: one server (`ops`), offered in DEPLOYS and GENERAL, whose
    `ops_deploy` needs two approvers from LEADS in DEPLOYS and one named person in GENERAL;
    every other channel is offered `ops_deploy` under the server's own rule. `ops_status`,
    read-only and so ungated by the server's rules, needs bob in GENERAL."""
    command = json.dumps([sys.executable, OPS_SERVER, "stdio"])
    text = f"""
name = "ops"
model = {json.dumps(model)}

[servers.ops]
command = {command}
env = {{ OPS_LOG = "${{OPS_LOG_A}}", OPS_PID = "${{OPS_PID_A}}" }}
trust_annotations = true
approval = {{ approvers = ["U0DAVE"] }}

[channels.{DEPLOYS}]
tools = ["ops"]
approvals = {{ ops_deploy = {{ approvers = ["{LEADS}"], count = 2 }} }}

[channels.{GENERAL}]
tools = ["ops_status", "ops_deploy"]
approvals = {{ "ops_dep*" = {{ approvers = ["U0BOB"] }}, ops_status = {{ approvers = ["U0BOB"] }} }}

[channels."*"]
tools = ["ops_deploy"]
"""
    path = folder / "handback.toml"
    path.write_text(text)
    return path
