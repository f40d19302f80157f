"""The channel is stored with the run: a run paused in one channel and resumed, continued or
retried by a process that never saw the event that began it (no channel given) still offers,
and runs, only that channel's tools (asserted on the requests the model server receives); a
resume that names another channel is refused before anything runs. On both stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import UsageError, agent_from_file
from bot.events import InteractionEvent
from bot.testing import OpenAICompatServer
from state import open_store

from .config_files import (
    DEPLOYS,
    GENERAL,
    OPS_TOOLS,
    calls,
    offered,
    two_servers,
)

pytestmark = pytest.mark.slow


async def _paused_in_deploys(path: Path, store_url: str) -> tuple[str, str]:
    """A run of the file's agent paused on `ops_deploy`'s approval in DEPLOYS, by an agent
    (and its MCP servers) that is gone afterwards: its run id and the interaction id."""
    first = agent_from_file(path)
    async with open_store(store_url) as store, first:
        first.store = store
        events = [e async for e in first(prompt="call ops_deploy", channel=DEPLOYS)]
    [approval] = [e for e in events if isinstance(e, InteractionEvent)]
    assert approval.payload["tool"] == "ops_deploy"
    return events[-1].run_id, approval.interaction_id


async def test_a_resume_without_the_event_offers_and_runs_the_channel_the_run_began_in(
    model: OpenAICompatServer, tmp_path: Path, store_url: str
) -> None:
    path = two_servers(tmp_path)
    run_id, approval = await _paused_in_deploys(path, store_url)
    assert offered(model.requests[-1]) == OPS_TOOLS
    asked = len(model.requests)
    # Another process: a fresh agent from the same file, told only the run and the answer.
    other = agent_from_file(path)
    async with open_store(store_url) as store, other:
        other.store = store
        saved = await store.load_run(run_id)
        assert saved is not None and saved.channel == DEPLOYS
        result = await other(parent_id=run_id, resume={approval: True}).collect()
        assert result.status.code == "success", result
        # The model's next turn after the call is offered DEPLOYS' tools, not the "*" set (none).
        assert len(model.requests) == asked + 1
        assert offered(model.requests[-1]) == OPS_TOOLS
        assert len(calls(tmp_path / "a.log", "deploy")) == 1
        # A continuation without a channel stays in the conversation's channel as well.
        more = await other(prompt="anything else?", parent_id=result.run_id).collect()
        assert more.status.code == "success"
        assert offered(model.requests[-1]) == OPS_TOOLS
        child = await store.load_run(more.run_id)
        assert child is not None and child.channel == DEPLOYS


async def test_a_retried_resume_keeps_the_stored_channel(
    model: OpenAICompatServer, tmp_path: Path, store_url: str
) -> None:
    path = two_servers(tmp_path)
    run_id, approval = await _paused_in_deploys(path, store_url)
    other = agent_from_file(path)
    async with open_store(store_url) as store, other:
        other.store = store
        # The first attempt of the child claimed the parent and died before it saved anything;
        # its retry (the same child id, no channel) continues with the parent's channel.
        claim = await store.claim_run(run_id, child_id="child-1")
        assert claim.won
        result = await other(parent_id=run_id, resume={approval: True}, run_id="child-1").collect()
        assert result.status.code == "success", result
        assert offered(model.requests[-1]) == OPS_TOOLS
        assert len(calls(tmp_path / "a.log", "deploy")) == 1


async def test_a_resume_that_names_another_channel_is_refused_before_anything_runs(
    model: OpenAICompatServer, tmp_path: Path, store_url: str
) -> None:
    path = two_servers(tmp_path)
    run_id, approval = await _paused_in_deploys(path, store_url)
    asked = len(model.requests)
    other = agent_from_file(path)
    async with open_store(store_url) as store, other:
        other.store = store
        with pytest.raises(UsageError, match=f"conversation in `{DEPLOYS}`"):
            await other(parent_id=run_id, resume={approval: True}, channel=GENERAL).collect()
        with pytest.raises(UsageError, match=f"cannot be resumed or continued in `{GENERAL}`"):
            await other(prompt="call ops_deploy", parent_id=run_id, channel=GENERAL).collect()
        saved = await store.load_run(run_id)
        assert saved is not None and saved.status == "paused" and saved.resumed_by is None
    assert calls(tmp_path / "a.log", "deploy") == []
    assert len(model.requests) == asked
