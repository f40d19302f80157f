"""Where an agent's runs go: a file in the working directory by default, the store the
environment names, or a store passed in (left open)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot import Agent
from bot.testing import FunctionModel
from bot.tools import ask_user
from state import Store, open_store

from .conftest import (
    events_of,
    make_agent,
    script,
)


async def test_default_store_is_a_file_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HANDBACK_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    agent = Agent(
        name="a",
        model=FunctionModel(script({"name": "ask_user", "arguments": {"question": "?"}})),
        tools=[ask_user],
    )
    async with agent:
        (p,), out, _ = await events_of(agent(prompt="x"))
        result = await agent(parent_id=out.run_id, resume={p.interaction_id: "y"}).collect()
    assert (tmp_path / "handback.db").is_file()
    async with open_store(f"sqlite:///{tmp_path / 'handback.db'}") as reopened:
        saved = await reopened.load_run(result.run_id)
        assert saved is not None and saved.output == "done: y" and saved.parent_id == out.run_id
    # Closing is final for the store the agent opened; closing twice is fine.
    await agent.aclose()
    with pytest.raises(Exception, match="closed"):
        await agent(prompt="again").collect()


async def test_store_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HANDBACK_STORE", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    async with Agent(name="a", model=FunctionModel(lambda m: "hi")) as agent:
        assert (await agent(prompt="x").collect()).output == "hi"
    assert (tmp_path / "elsewhere.db").is_file() and not (tmp_path / "handback.db").exists()


async def test_a_store_passed_in_stays_open(store: Store) -> None:
    async with make_agent(store, lambda m: "hi", []) as agent:
        out = await agent(prompt="x").collect()
    assert (await store.load_run(out.run_id)) is not None
