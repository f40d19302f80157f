"""Who shaped a turn (`by`) stays with its runs until the turn ends, across pauses."""

from __future__ import annotations

from typing import Any

import pytest

from bot import UsageError
from bot.tools import ask_user
from state import Store

from .conftest import events_of, make_agent, script


def _asker(store: Store) -> Any:
    return make_agent(
        store, script({"name": "ask_user", "arguments": {"question": "Which?"}}), [ask_user]
    )


async def test_answerers_join_the_starter_until_the_turn_ends(store: Store) -> None:
    agent = _asker(store)
    [asked], paused, _ = await events_of(agent(prompt="go", by=["U0ALICE"]))
    first = await store.load_run(paused.run_id)
    assert first is not None and first.requesters == ["U0ALICE"]

    resumed = agent(parent_id=paused.run_id, resume={asked.interaction_id: "x"}, by=["U0BOB"])
    done = await resumed.collect()
    assert done.status.code == "success"
    assert resumed.requesters == ["U0ALICE", "U0BOB"]
    saved = await store.load_run(done.run_id)
    assert saved is not None and saved.requesters == ["U0ALICE", "U0BOB"]

    # The turn ended with an answer: the next message starts a fresh set.
    after = agent(prompt="again", parent_id=done.run_id, by=["U0CAROL"])
    await after.collect()
    assert after.requesters == ["U0CAROL"]


async def test_a_message_that_supersedes_a_pause_keeps_the_turn_going(store: Store) -> None:
    agent = _asker(store)
    _, paused, _ = await events_of(agent(prompt="go", by=["U0ALICE"]))
    follow = agent(prompt="actually", parent_id=paused.run_id, by=["U0DAVE", "U0ALICE"])
    await follow.collect()
    assert follow.requesters == ["U0ALICE", "U0DAVE"]


@pytest.mark.parametrize("by", ["U0ALICE", [""], [7]])
async def test_by_must_name_people(store: Store, by: Any) -> None:
    with pytest.raises(UsageError, match="by must be"):
        _asker(store)(prompt="x", by=by)
