"""Reminders and escalation of unanswered approvals (`Approval(remind_after=..., escalate_to=...)`)
end to end: the periodic sweep fires each once, at its time by the bot's (injected) clock, in the
thread, across a restart and with several sweepers on one store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from contextlib import AsyncExitStack
from typing import Any

import pytest

from blocks import ACTION_APPROVE
from bot import Agent, chatops
from bot.playground import APPROVERS as PLAYGROUND_APPROVERS
from bot.slack import SlackBot, load_settings
from bot.testing import FunctionModel
from state import open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, CAROL, CHANNEL, DAVE, BotFactory, Harness
from .durable import answers, card_in, poll
from .processes import ROOT, Fleet

REMINDER = ":bell: Reminder"
ESCALATED = ":arrow_up: Nobody has approved"


def nudges(h: Harness, thread_ts: str) -> list[str]:
    return [t for t in h.texts(thread_ts) if t.startswith((REMINDER, ESCALATED))]


async def actions(h: Harness) -> list[str]:
    return [e.action for e in reversed(await h.store.recent_audit())]


async def test_reminder_then_escalation_each_once_at_its_time(make_bot: BotFactory) -> None:
    async with make_bot(agents.reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)

        h.clock.advance(299)
        assert await h.bot.sweeper.run_until_idle() == 0
        assert nudges(h, asked.ts) == []

        h.clock.advance(1)
        assert await h.bot.sweeper.run_until_idle() == 1
        [reminder] = nudges(h, asked.ts)
        assert reminder.startswith(REMINDER) and "<!subteam^S0OPS>" in reminder
        assert f"<@{DAVE}>" not in reminder
        assert await h.bot.sweeper.run_until_idle() == 0

        # Not escalated yet: dave may not approve.
        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert "not on the list" in h.ephemerals(DAVE)[-1]
        assert agents.DEPLOYS == []

        h.clock.advance(599)
        assert await h.bot.sweeper.run_until_idle() == 0
        h.clock.advance(1)
        assert await h.bot.sweeper.run_until_idle() == 1
        assert await h.bot.sweeper.run_until_idle() == 0
        [_, escalation] = nudges(h, asked.ts)
        assert escalation.startswith(ESCALATED) and f"<@{DAVE}>" in escalation
        shown = h.slack.message(card.channel, card.ts)
        assert shown is not None
        note = str(shown.blocks)
        assert "Who may approve now" in note and "<!subteam^S0OPS>" in note
        assert f"<@{DAVE}>" in note and ACTION_APPROVE in note  # still open
        assert f"Escalated to <@{DAVE}>" in note

        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        assert h.texts(asked.ts)[-1] == "Tool said: deployed api to prod"

        h.clock.advance(10 * 24 * 3600)
        assert await h.bot.sweeper.run_until_idle() == 0
        assert len(nudges(h, asked.ts)) == 2
        assert [a for a in await actions(h) if a in ("reminded", "escalated", "answered")] == [
            "reminded",
            "escalated",
            "answered",
        ]


async def test_nothing_fires_after_an_answer(make_bot: BotFactory) -> None:
    async with make_bot(agents.reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        h.clock.advance(200)
        await h.click(BOB, h.card(asked.ts).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]
        for _ in range(3):
            h.clock.advance(400)
            assert await h.bot.sweeper.run_until_idle() == 0
        assert nudges(h, asked.ts) == []
        assert not {"reminded", "escalated"} & set(await actions(h))


async def test_nothing_fires_for_an_expired_request(make_bot: BotFactory) -> None:
    async with make_bot(agents.reminding_agent, HANDBACK_INTERACTION_TTL="250") as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        h.clock.advance(301)
        assert await h.bot.sweeper.run_until_idle() == 1  # the expiry, and nothing else
        h.clock.advance(1000)
        assert await h.bot.sweeper.run_until_idle() == 0
        assert nudges(h, asked.ts) == []
        assert "expired" in await actions(h)
        assert not {"reminded", "escalated"} & set(await actions(h))


async def test_nothing_fires_for_a_stopped_request(make_bot: BotFactory) -> None:
    async with make_bot(agents.reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        await h.slack.press_stop(ALICE, asked.channel, asked.ts)
        await h.bot.drain()
        h.clock.advance(1000)
        assert await h.bot.sweeper.run_until_idle() == 0
        assert nudges(h, asked.ts) == []
        assert "cancelled" in await actions(h)


async def test_in_a_direct_message_the_named_approvers_are_told_by_dm(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.dm_reminding_agent) as h:
        dm = h.slack.dm_channel(ALICE)
        asked = await h.mention(ALICE, "deploy api to prod", channel=dm)
        assert h.card(asked.ts).channel == dm
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        [reminder] = nudges(h, asked.ts)
        assert f"<@{BOB}>" in reminder and "<!subteam^S0OPS>" in reminder
        told = h.slack.bot_messages(channel=h.slack.dm_channel(BOB))
        assert len(told) == 1 and told[0].text.startswith(REMINDER)
        assert f"<@{ALICE}> asked for it in a direct message" in told[0].text
        # Nobody else is sent one: groups are mentioned, not messaged, and dave is not yet in.
        assert h.slack.bot_messages(channel=h.slack.dm_channel(DAVE)) == []

        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        [escalated] = h.slack.bot_messages(channel=h.slack.dm_channel(DAVE))
        assert escalated.text.startswith(ESCALATED)
        assert len(h.slack.bot_messages(channel=h.slack.dm_channel(BOB))) == 1


async def test_a_restart_loses_nothing_and_repeats_nothing(make_bot: BotFactory) -> None:
    async with make_bot(agents.reminding_agent) as first:
        asked = await first.mention(ALICE, "deploy api to prod")
        first.clock.advance(300)
        assert await first.bot.sweeper.run_until_idle() == 1
    # A new process: what is due, and what already fired, is read from the store.
    async with make_bot(agents.reminding_agent) as second:
        second.clock.now = first.clock.now
        assert await second.bot.sweeper.run_until_idle() == 0
        second.clock.advance(600)
        assert await second.bot.sweeper.run_until_idle() == 1
        assert [t[:10] for t in nudges(second, asked.ts)] == [REMINDER[:10], ESCALATED[:10]]
        await second.click(DAVE, second.card(asked.ts).ts, ACTION_APPROVE)
        assert agents.DEPLOYS == [{"service": "api", "environment": "prod"}]


async def test_two_sweepers_on_one_store_fire_each_once(
    make_bot: BotFactory, slack: TestSlack, store_url: str
) -> None:
    async with make_bot(agents.reminding_agent) as h, AsyncExitStack() as stack:
        asked = await h.mention(ALICE, "deploy api to prod")
        settings = load_settings(
            slack_bot_token=slack.bot_token,
            slack_signing_secret=slack.signing_secret,
            slack_api_url=slack.api_url,
            handback_store=store_url,
        )
        others = []
        for _ in range(3):
            store = await stack.enter_async_context(open_store(store_url))
            bot = SlackBot(
                agent=agents.twin(agents.reminding_agent),  # another process's agent
                store=store,
                settings=settings,
                clock=h.clock,
                loops=False,
            )
            others.append(await stack.enter_async_context(bot))
        sweepers = [h.bot.sweeper, *(bot.sweeper for bot in others)]
        for seconds in (300, 600):
            h.clock.advance(seconds)
            fired = await asyncio.gather(*(s.run_until_idle() for s in sweepers))
            assert sum(fired) == 1
        assert [t[:10] for t in nudges(h, asked.ts)] == [REMINDER[:10], ESCALATED[:10]]
        assert [a for a in await actions(h) if a in ("reminded", "escalated")] == [
            "reminded",
            "escalated",
        ]


class SweepProcesses:
    """Bot processes on one store that sweep, all at once, at the times they are sent."""

    def __init__(self, procs: list[asyncio.subprocess.Process]) -> None:
        self.procs = procs

    @classmethod
    async def start(cls, store_url: str, slack: TestSlack, count: int) -> SweepProcesses:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        args = [store_url, slack.api_url, slack.bot_token, slack.signing_secret]
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.slack.sweep_worker",
                *args,
                cwd=ROOT,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            for _ in range(count)
        ]
        sweepers = cls(procs)
        async with asyncio.timeout(60):
            for proc in procs:
                assert proc.stdout is not None
                assert (await proc.stdout.readline()).strip() == b"ready"
        return sweepers

    async def sweep(self, now: float) -> int:
        """Every process sweeps at `now` at the same moment; how many fired, in all."""
        for proc in self.procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{now!r}\n".encode())
        await asyncio.gather(*(proc.stdin.drain() for proc in self.procs if proc.stdin))
        fired = 0
        async with asyncio.timeout(30):
            for proc in self.procs:
                assert proc.stdout is not None
                fired += json.loads(await proc.stdout.readline())["fired"]
        return fired

    async def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None and proc.returncode is None:
                proc.stdin.write(b"\n")
        for proc in self.procs:
            try:
                async with asyncio.timeout(20):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        assert [proc.returncode for proc in self.procs] == [0] * len(self.procs)


async def test_sweepers_in_separate_processes_fire_each_once(
    make_bot: BotFactory, slack: TestSlack, store_url: str
) -> None:
    async with make_bot(agents.reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        start = h.clock.now
    # The bot that posted the card is gone; two fresh processes sweep the same store.
    sweepers = await SweepProcesses.start(store_url, slack, 2)
    try:
        assert await sweepers.sweep(start + 299) == 0
        assert await sweepers.sweep(start + 300) == 1
        assert await sweepers.sweep(start + 899) == 0
        assert await sweepers.sweep(start + 900) == 1
        assert await sweepers.sweep(start + 2000) == 0
    finally:
        await sweepers.stop()
    texts = [m.text for m in slack.bot_messages(thread_ts=asked.ts) if not m.blocks]
    assert [t[:10] for t in texts if t.startswith((REMINDER, ESCALATED))] == [
        REMINDER[:10],
        ESCALATED[:10],
    ]


async def test_the_chatops_prod_deploy_reminds_then_escalates_to_dave(
    make_bot: BotFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The playground's demo: a prod deploy nobody answers reminds bob and carol after five
    minutes and lets dave approve five minutes later (the playground sweeps by the real clock)."""
    monkeypatch.setattr(chatops, "fleet", chatops.Fleet.fresh())

    def respond(messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        if messages[-1]["role"] == "tool":
            return str(messages[-1]["content"])
        arguments = {"service": "web", "version": "2.1.0", "environment": "prod"}
        return [{"name": "deploy", "arguments": arguments}]

    agent = Agent(
        name="ops", model=FunctionModel(respond), tools=list(chatops.agent.tools.values())
    )
    async with make_bot(agent, HANDBACK_APPROVERS=",".join(PLAYGROUND_APPROVERS)) as h:
        asked = await h.mention(ALICE, "ship web 2.1.0 to prod")
        card = h.card(asked.ts)
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        [reminder] = nudges(h, asked.ts)
        assert f"<@{BOB}>" in reminder and f"<@{CAROL}>" in reminder
        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert "not on the list" in h.ephemerals(DAVE)[-1]
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        assert f"<@{DAVE}>" in nudges(h, asked.ts)[-1]
        refusals = len(h.ephemerals(DAVE))
        await h.click(DAVE, card.ts, ACTION_APPROVE)
        assert len(h.ephemerals(DAVE)) == refusals  # admitted now
        audit = await h.store.recent_audit()
        assert [e.action for e in audit if e.user == DAVE and e.action == "refused"] == ["refused"]
        assert any(e.user == DAVE and e.action != "refused" for e in audit)


async def test_the_escalation_puts_the_request_in_the_new_approvers_home(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        interaction = h.interaction_id(h.card(asked.ts))
        assert (await h.slack.open_home(DAVE)).status == 200
        await h.bot.drain()
        assert interaction not in str(h.slack.home_view(DAVE))

        h.clock.advance(300)
        await h.bot.sweeper.run_until_idle()
        await h.bot.drain()
        assert interaction not in str(h.slack.home_view(DAVE))  # reminded, not escalated

        h.clock.advance(600)
        await h.bot.sweeper.run_until_idle()
        await h.bot.drain()
        assert interaction in str(h.slack.home_view(DAVE))  # refreshed without opening it


async def test_handback_run_processes_fire_each_once_across_a_kill(
    slack: TestSlack, store_url: str
) -> None:
    """Real `handback run` processes on the real clock, each sweeping every 0.1 s: the one that
    posted the card is killed, another starts, and the reminder and the escalation still come,
    once each."""
    env = {"HANDBACK_SWEEP_INTERVAL": "0.1"}
    async with Fleet(
        slack, store_url, ref="tests.slack.agents:quick_reminding_agent", env=env
    ) as f:
        first, _ = await f.start("all", "all")
        asked = await slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        card = await card_in(slack, asked.ts)
        await f.kill(first)
        await f.start("all")

        def fired() -> list[str]:
            return [t for t in answers(slack, asked.ts) if t.startswith((REMINDER, ESCALATED))]

        await poll(lambda: len(fired()) >= 2, timeout=30, what="the reminder and the escalation")
        await asyncio.sleep(1.0)  # three sweepers, ten sweeps a second each: nothing more comes
        assert [t[:10] for t in fired()] == [REMINDER[:10], ESCALATED[:10]]
        await slack.click(DAVE, card.ts, ACTION_APPROVE)  # escalated to him: it counts
        done = "Tool said: deployed api to prod"
        await poll(lambda: done in answers(slack, asked.ts), timeout=20, what="the deploy")


async def test_a_reminder_that_can_name_nobody_says_the_request_waits(
    make_bot: BotFactory,
) -> None:
    async with make_bot(agents.unnamed_reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        assert nudges(h, asked.ts) == [
            ":bell: Reminder: the request to run `deploy` still waits for an approver."
        ]
        h.clock.advance(10_000)
        assert await h.bot.sweeper.run_until_idle() == 0  # no escalation without escalate_to


async def test_an_escalation_counts_the_votes_already_given(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_person_reminding_agent) as h:
        asked = await h.mention(ALICE, "deploy api to prod")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_APPROVE)
        assert agents.DEPLOYS == []
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        h.clock.advance(300)
        assert await h.bot.sweeper.run_until_idle() == 1
        escalated = [t for t in h.texts(asked.ts) if t.startswith(":arrow_up:")]
        assert len(escalated) == 1, h.texts(asked.ts)
        assert "Nobody has approved" not in escalated[0]
        assert f"1 of 2 approvals so far (<@{BOB}>)" in escalated[0], escalated[0]
        assert f"<@{DAVE}>" in escalated[0]
