"""The stop button over real HTTP, signed as Slack signs, on both stores: only the turn's
initiator or someone who may answer what it waits on may stop it, from the app's workspace; a
refused stop changes nothing and its sender is told why; an allowed stop is final for the run
it covers (no grant or recovery resumes it); a stop that loses to an approval is told so."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from blocks import ACTION_APPROVE, ACTION_GRANT

from .._local_slack import ApiCall, ChangeKind, TestSlack
from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, BotFactory, Harness

THREAD_GRANT = f"{ACTION_GRANT}:thread"


class InterposingSlack(TestSlack):
    """A LocalSlack that, the moment a Web API call arrives and before it is answered, awaits
    `before(call)`: a person acting while the bot waits on Slack."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.before: Callable[[ApiCall], Awaitable[None]] | None = None

    async def publish(self, kind: ChangeKind, data: dict[str, Any]) -> None:
        if kind == "call" and self.calls and self.before is not None:
            await self.before(self.calls[-1])
        await super().publish(kind, data)


@pytest.fixture
async def slack() -> AsyncIterator[TestSlack]:
    async with InterposingSlack() as local:
        local.agent_refusal = None  # the app is an agent: its sessions have a stop button
        yield local


async def _stop_event(slack: TestSlack, user: str, thread_ts: str, **event: Any) -> int:
    response = await slack.send_event(
        {
            "type": "agent_session_stopped",
            "channel": CHANNEL,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": [],
            "event_ts": slack.new_ts(),
            **event,
        }
    )
    return response.status


@pytest.mark.parametrize(
    ("who", "event"),
    [(CAROL, {}), (ALICE, {"user_team": "T0ELSEWHERE"})],
    ids=["another-user", "another-workspace"],
)
async def test_an_outsider_s_stop_changes_nothing_and_is_told_why(
    make_bot: BotFactory, slack: TestSlack, who: str, event: dict[str, Any]
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=BOB) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        assert await _stop_event(slack, who, asked.ts, **event) == 200
        await h.bot.drain()
        assert await h.store.thread_stop(CHANNEL, asked.ts) is None
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"
        assert ACTION_APPROVE in str(h.card(asked.ts).blocks)
        [told] = h.ephemerals(who)
        assert "nothing was stopped" in told and "deploy" not in told
        refused = [e for e in await h.store.recent_audit() if e.action == "refused"]
        assert [(e.user, "stop of" in e.detail) for e in refused] == [(who, True)]
        assert not [e for e in await h.store.recent_audit() if e.action == "stopped"]

        # The approver may still approve, and the tool runs once.
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        assert len(agents.DEPLOYS) == 1


async def test_an_approver_of_the_open_request_may_stop_it(
    make_bot: BotFactory, slack: TestSlack
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=BOB) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        assert await _stop_event(slack, BOB, asked.ts) == 200
        await h.bot.drain()
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "cancelled"
        assert h.ephemerals(BOB) == []
        assert agents.DEPLOYS == []


async def _grant_thread(h: Harness) -> str:
    asked = await h.mention(ALICE, "deploy api to dev")
    assert await h.click(BOB, h.card(asked.ts).ts, THREAD_GRANT) == 200
    assert len(agents.DEPLOYS) == 1
    return asked.ts


async def test_a_stop_while_a_grant_approves_the_call_stops_the_tool_every_time(
    make_bot: BotFactory, slack: InterposingSlack
) -> None:
    """The requester presses stop while the grant's notice is posting (the call is approved
    under the grant, the tool has not started): the tool never runs, not by the turn, not by the
    recovery that resumes settled runs; the next message starts a new turn as usual."""
    async with make_bot(agents.grant_agent, HANDBACK_APPROVERS=BOB) as h:
        thread = await _grant_thread(h)
        pressed: list[int] = []

        async def stop_on_the_notice(call: ApiCall) -> None:
            text = str(call.args.get("text") or "")
            if call.method == "chat.postMessage" and "standing grant" in text and not pressed:
                pressed.append(await _stop_event(slack, ALICE, thread))

        for attempt in range(10):
            pressed.clear()
            slack.before = stop_on_the_notice
            await h.reply(ALICE, thread, f"deploy again ({attempt})")
            slack.before = None
            assert pressed == [200], attempt
            # The sweep's recovery finds no settled run to resume: the stop claimed it.
            for _ in range(3):
                h.clock.advance(5)
                await h.bot.sweeper.run_until_idle()
                await h.bot.drain()
            assert len(agents.DEPLOYS) == 1, attempt
            run_id = await h.store.get_thread_run(CHANNEL, thread)
            assert run_id is not None
            run = await h.store.load_run(run_id)
            assert run is not None and run.status == "cancelled", (attempt, run)
        assert await h.store.settled_runs() == []

        # A new message in the thread is a new turn: the grant still covers it, and it runs.
        await h.reply(ALICE, thread, "deploy once more")
        assert len(agents.DEPLOYS) == 2


async def test_a_stop_that_loses_to_an_approval_is_told_what_runs(
    make_bot: BotFactory, slack: InterposingSlack
) -> None:
    async with make_bot(agents.approval_agent, HANDBACK_APPROVERS=BOB) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        pressed: list[int] = []

        async def stop_as_the_card_closes(call: ApiCall) -> None:
            # The click has claimed the run (the card shows it approved): the approval won.
            if call.method == "chat.update" and call.args.get("ts") == card.ts and not pressed:
                pressed.append(await _stop_event(slack, ALICE, asked.ts))

        slack.before = stop_as_the_card_closes
        assert await h.click(BOB, card.ts, ACTION_APPROVE) == 200
        slack.before = None
        assert pressed == [200]
        [told] = h.ephemerals(ALICE)
        assert "An approval came first" in told
        assert f"`deploy` approved by <@{BOB}>" in told
