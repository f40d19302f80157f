"""MCP tools in Slack: a gated call is a card naming the server and why; approved, it reaches
the server exactly once (counted on the server's side), however many people click; denied, it
never does; a question a server asks during the call is answered on its card in the thread.
Real MCP servers as subprocesses: the tests' `ops_server.py`, `legacy_server.py` and
`mcp-server-git`."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_DENY, ACTION_OPTION
from bot import Agent
from bot.mcp import MCPServer
from bot.testing import FunctionModel

from ..mcp.conftest import Ops, ops_in
from .conftest import ALICE, BOB, CAROL, DAVE, BotFactory, Harness

pytestmark = pytest.mark.slow


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


def _model(*calls: dict[str, Any]) -> FunctionModel:
    """Makes `calls` for a new prompt, then says what the tools said."""

    def respond(messages: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return list(calls)
        results = [m["content"] for m in messages if m["role"] == "tool"]
        return "Tools said: " + " | ".join(results[-len(calls) :])

    return FunctionModel(respond)


@asynccontextmanager
async def _bot(
    make_bot: BotFactory, server: MCPServer, *calls: dict[str, Any]
) -> AsyncIterator[Harness]:
    agent = Agent(name="ops", model=_model(*calls), tools=[server])
    async with agent.toolsets_open(), make_bot(agent) as h:
        yield h


DEPLOY = {"name": "ops_deploy", "arguments": {"service": "api", "version": "2.4"}}
LEGACY_SERVER = str(Path(__file__).parent.parent / "mcp" / "legacy_server.py")


async def test_an_approved_mcp_call_reaches_the_server_once_and_the_card_says_why(
    make_bot: BotFactory, ops: Ops
) -> None:
    async with _bot(make_bot, ops.stdio(trust_annotations=True), DEPLOY) as h:
        asked = await h.mention(ALICE, "deploy api 2.4")
        card = h.card(asked.ts)
        shown = str(card.blocks)
        assert "`ops_deploy`" in shown and "*MCP server:* `ops`" in shown
        assert "*Needs approval:* destructive" in shown
        assert ops.calls() == []  # nothing is sent before approval

        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200

        assert ops.calls() == [
            {"tool": "deploy", "arguments": {"service": "api", "version": "2.4"}}
        ]
        assert h.texts(asked.ts)[-1] == "Tools said: deployed api 2.4"
        [answered] = [e for e in await h.store.recent_audit() if e.action == "answered"]
        assert answered.user == BOB and "[MCP ops: gated: destructive]" in answered.detail


async def test_a_denied_mcp_call_never_reaches_the_server(make_bot: BotFactory, ops: Ops) -> None:
    async with _bot(make_bot, ops.stdio(), DEPLOY) as h:
        asked = await h.mention(ALICE, "deploy api 2.4")
        card = h.card(asked.ts)
        assert "server not trusted for annotations" in str(card.blocks)
        await h.click(CAROL, card.ts, ACTION_DENY)
        assert ops.calls() == []
        assert h.texts(asked.ts)[-1].startswith("Tools said: Denied:")


async def test_thirty_concurrent_clicks_make_one_mcp_call(make_bot: BotFactory, ops: Ops) -> None:
    async with _bot(make_bot, ops.stdio(trust_annotations=True), DEPLOY) as h:
        asked = await h.mention(ALICE, "deploy api 2.4")
        card = h.card(asked.ts)
        statuses = await asyncio.gather(
            *(h.slack.click(user, card.ts, ACTION_APPROVE) for user in [BOB, CAROL, DAVE] * 10)
        )
        await h.bot.drain()
        assert [s.status for s in statuses] == [200] * 30
        assert len(ops.calls("deploy")) == 1
        assert h.texts(asked.ts) == ["Tools said: deployed api 2.4"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bot@example.com")
    _git(repo, "config", "user.name", "bot")
    (repo / "README").write_text("one\n")
    _git(repo, "add", "README")
    _git(repo, "commit", "-q", "-m", "first")
    (repo / "README").write_text("two\n")
    _git(repo, "add", "README")
    return repo


async def test_mcp_server_git_reads_ungated_and_commits_once_after_approval(
    make_bot: BotFactory, repo: Path
) -> None:
    pytest.importorskip("mcp_server_git")
    server = MCPServer.stdio(
        "repo",
        [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)],
        trust_annotations=True,
    )
    status = {"name": "repo_git_status", "arguments": {"repo_path": str(repo)}}
    commit = {"name": "repo_git_commit", "arguments": {"repo_path": str(repo), "message": "two"}}
    async with _bot(make_bot, server, status, commit) as h:
        offered = set(h.bot.agent.tools)
        assert {"repo_git_status", "repo_git_log", "repo_git_commit"} <= offered
        asked = await h.mention(ALICE, "commit the staged change")
        [card] = h.cards(asked.ts)  # only the commit waits: git_status ran ungated
        assert "`repo_git_commit`" in str(card.blocks)
        assert _git(repo, "rev-list", "--count", "HEAD").strip() == "1"

        await h.click(BOB, card.ts, ACTION_APPROVE)

        assert _git(repo, "rev-list", "--count", "HEAD").strip() == "2"
        assert _git(repo, "log", "-1", "--format=%s").strip() == "two"
        answer = h.texts(asked.ts)[-1]
        assert "Changes to be committed" in answer and "Changes committed successfully" in answer


async def test_a_question_asked_during_the_call_is_answered_on_its_card(
    make_bot: BotFactory, ops: Ops
) -> None:
    legacy = MCPServer.stdio(
        "legacy",
        [sys.executable, LEGACY_SERVER],
        env={"OPS_LOG": str(ops.log), "OPS_PID": str(ops.pid)},
        approvals={"*": False},
    )
    async with _bot(make_bot, legacy, {"name": "legacy_pick", "arguments": {}}) as h:
        # The turn waits for the click: `asking` returns with the card, the turn still open.
        asked, card = await h.asking(ALICE, "pick a region")
        assert "after a restart the call is reported interrupted" in str(card.blocks)
        assert await h.click(ALICE, card.ts, f"{ACTION_OPTION}:2", value="2") == 200
        assert h.texts(asked.ts)[-1] == "Tools said: picked accept {'region': 'ap'}"
    [answered] = [c for c in ops.calls("pick") if c["phase"] == "answered"]
    assert answered["data"] == {"region": "ap"}
