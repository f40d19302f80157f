"""The README's python blocks run as written, in order and in one namespace (as a reader
follows them), with the scripted model in place of OpenAI: no test reaches the internet."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from bot import Agent
from bot.events import OutputEvent
from bot.testing import FunctionModel

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    return BLOCK.findall(README.read_text())


def deploy_then_answer(messages: list[dict[str, Any]]) -> Any:
    """Asks to deploy api 2.3 to prod, then answers with the tool's result."""
    results = [m["content"] for m in messages if m.get("role") == "tool"]
    if results:
        return results[-1]
    return [
        {"name": "deploy", "arguments": {"service": "api", "version": "2.3", "environment": "prod"}}
    ]


class Deployer:
    async def deploy(self, service: str, version: str, environment: str, *, key: str) -> str:
        return f"{service} {version} in {environment} ({key})"


def fleet_status() -> str:
    """The fleet's status."""
    return "green"


def rotate_secret(vault_path: str) -> str:
    """Rotate a secret."""
    return "rotated"


def restart(service: str) -> str:
    """Restart a service."""
    return f"{service} restarted"


def my_python_tool(text: str) -> str:
    """Echo."""
    return text


# What the README leaves to the reader: their deployer and their own tools.
READERS_OWN = {
    "my_deployer": Deployer(),
    "fleet_status": fleet_status,
    "rotate_secret": rotate_secret,
    "restart": restart,
    "my_python_tool": my_python_tool,
}


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # the default store is ./handback.db


def run_first_block(capsys: pytest.CaptureFixture[str], *, scripted: bool) -> str:
    namespace: dict[str, Any] = {"__name__": "readme"}
    exec(compile(blocks()[0], "README.md", "exec"), namespace)
    agent = namespace["agent"]
    assert isinstance(agent, Agent)
    if scripted:
        agent.model = FunctionModel(deploy_then_answer)
    asyncio.run(namespace["main"]())
    return capsys.readouterr().out


def test_the_first_example_pauses_for_approval_and_runs_the_tool_once_resumed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_first_block(capsys, scripted=True) == "api 2.3 is live in prod\n"


def test_the_first_example_without_a_key_says_why_in_one_line(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = run_first_block(capsys, scripted=False)
    assert out.count("\n") == 1, out
    assert out.startswith("error the model call to `gpt-4o-mini` failed: OpenAIError: ")
    assert "OPENAI_API_KEY" in out and "StopIteration" not in out
    logged = [r for r in caplog.records if "failed" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is None  # one line, no traceback
    assert "the model call to `gpt-4o-mini` failed: OpenAIError" in logged[0].getMessage()


def test_every_later_block_runs_in_the_namespace_of_those_before() -> None:
    first, *later = blocks()
    assert len(later) >= 4, "the README's python blocks moved: update this test"
    namespace: dict[str, Any] = {"__name__": "readme", **READERS_OWN}
    exec(compile(first, "README.md", "exec"), namespace)
    for source in later:
        tree = ast.parse(source)
        last = tree.body[-1]
        if isinstance(last, ast.AsyncWith):
            # `async with agent:` opens MCP sessions: mcp-server-git and a host on the
            # internet here (tests/mcp open real servers); everything before it runs.
            tree.body = tree.body[:-1]
        code = compile(tree, "README.md", "exec")
        exec(code, namespace)
    assert {"sre", "lead", "repo", "tickets"} <= namespace.keys()
    lead = namespace["lead"]
    assert list(lead.tools) == ["sre"]


def test_a_command_call_from_the_readme_waits_for_approval() -> None:
    namespace: dict[str, Any] = {"__name__": "readme", **READERS_OWN}
    exec(compile(blocks()[0], "README.md", "exec"), namespace)
    command_block = next(b for b in blocks() if "agent.call_tool(" in b)
    *setup, call = command_block.strip().splitlines()
    exec("\n".join(setup), namespace)
    run = eval(call, namespace)
    output = asyncio.run(run.collect())
    assert isinstance(output, OutputEvent)
    assert (output.status.code, output.status.reason) == ("cancelled", "input_required")
