"""Questions end to end: confirm, option buttons, selects, multi-select + Submit, typed modals."""

from __future__ import annotations

from blocks import (
    ACTION_ANSWER,
    ACTION_CONFIRM,
    ACTION_MULTI,
    ACTION_SELECT,
    ACTION_SUBMIT,
)

from . import agents
from .conftest import ALICE, BOB, CAROL, BotFactory


async def test_confirm(make_bot: BotFactory) -> None:
    async with make_bot(agents.confirm_agent) as h:
        asked = await h.mention(ALICE, "restart api")
        card = h.card(asked.ts)
        assert "Restart api in prod?" in card.text
        await h.click(BOB, card.ts, ACTION_CONFIRM)
        assert h.texts(asked.ts)[-1] == "Tool said: true"
        assert f"<@{BOB}>" in str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]


async def test_option_buttons(make_bot: BotFactory) -> None:
    async with make_bot(agents.select_agent) as h:
        asked = await h.mention(ALICE, "pick an environment")
        card = h.card(asked.ts)
        # The button sends an index; the answer comes from the stored options.
        await h.click(ALICE, card.ts, "hb:option:1")
        assert h.texts(asked.ts)[-1] == "Tool said: staging"


async def test_static_select(make_bot: BotFactory) -> None:
    async with make_bot(agents.big_select_agent) as h:
        asked = await h.mention(ALICE, "pick a service")
        card = h.card(asked.ts)
        await h.click(CAROL, card.ts, ACTION_SELECT, selected="service-017")
        assert h.texts(asked.ts)[-1] == "Tool said: service-017"
        shown = str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]
        assert "service-017" in shown and f"<@{CAROL}>" in shown


async def test_multi_select_then_submit(make_bot: BotFactory) -> None:
    async with make_bot(agents.multi_agent) as h:
        asked = await h.mention(ALICE, "which services")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_MULTI, selected=["worker", "api"])
        assert h.texts(asked.ts) == []  # ticking boxes answers nothing yet
        await h.click(BOB, card.ts, ACTION_SUBMIT)
        assert h.texts(asked.ts)[-1] == 'Tool said: ["api", "worker"]'


async def test_submit_with_nothing_ticked_is_refused(make_bot: BotFactory) -> None:
    async with make_bot(agents.multi_agent) as h:
        asked = await h.mention(ALICE, "which services")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_SUBMIT)
        assert h.ephemerals(BOB), "an empty Submit should be explained"
        stored = await h.store.get_interaction(h.interaction_id(card))
        assert stored is not None and stored.status == "pending"


async def test_typed_answer_in_a_modal_with_inline_errors(make_bot: BotFactory) -> None:
    async with make_bot(agents.typed_agent) as h:
        asked = await h.mention(ALICE, "scale it")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, ACTION_ANSWER)
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]

        too_many = await h.slack.submit_view(BOB, view.id, {field: "50"})
        assert too_many.json()["response_action"] == "errors"
        assert field in too_many.json()["errors"]
        await h.bot.drain()
        assert h.texts(asked.ts) == []

        ok = await h.slack.submit_view(BOB, view.id, {field: "3"})
        assert ok.status == 200
        await h.bot.drain()
        assert h.texts(asked.ts)[-1] == "Tool said: replicas=3"


async def test_free_text_reply_answers_pending_question(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent) as h:
        asked = await h.mention(ALICE, "cut a release")
        card = h.card(asked.ts)
        interaction_id = h.interaction_id(card)
        await h.reply(BOB, asked.ts, "Blue Falcon")
        assert h.texts(asked.ts)[-1] == "Tool said: Blue Falcon"
        stored = await h.store.get_interaction(interaction_id)
        assert stored is not None and stored.answered_by == BOB
        assert "Blue Falcon" in str(h.slack.message(card.channel, card.ts).blocks)  # type: ignore[union-attr]


async def test_free_text_question_also_opens_a_modal(make_bot: BotFactory) -> None:
    async with make_bot(agents.free_text_agent) as h:
        asked = await h.mention(ALICE, "cut a release")
        await h.click(ALICE, h.card(asked.ts).ts, ACTION_ANSWER)
        [view] = list(h.slack.views.values())
        [field] = [b["block_id"] for b in view.view["blocks"] if b["type"] == "input"]
        await h.slack.submit_view(ALICE, view.id, {field: "Red Heron"})
        await h.bot.drain()
        assert h.texts(asked.ts)[-1] == "Tool said: Red Heron"


async def test_two_pending_questions_resume_once_both_answered(make_bot: BotFactory) -> None:
    async with make_bot(agents.two_question_agent) as h:
        asked = await h.mention(ALICE, "two things")
        first, second = h.cards(asked.ts)
        await h.click(BOB, first.ts, ACTION_CONFIRM)
        assert h.texts(asked.ts) == []
        assert "Bob" in str(h.slack.message(first.channel, first.ts).blocks) or f"<@{BOB}>" in str(
            h.slack.message(first.channel, first.ts).blocks  # type: ignore[union-attr]
        )
        await h.click(CAROL, second.ts, "hb:cancel")
        assert h.texts(asked.ts) == ['Both: ["true", "false"]']


async def test_over_a_hundred_options_page_then_select(make_bot: BotFactory) -> None:
    async with make_bot(agents.huge_select_agent) as h:
        asked = await h.mention(ALICE, "pick a host")
        card = h.card(asked.ts)
        await h.click(BOB, card.ts, "hb:more:1")
        second_page = h.card(asked.ts)
        assert "host-120" in str(second_page.blocks)
        assert h.texts(asked.ts) == []
        await h.click(BOB, card.ts, ACTION_SELECT, selected="host-120")
        assert h.texts(asked.ts) == ["Tool said: host-120"]


async def test_a_failing_run_is_a_friendly_message_not_a_traceback(make_bot: BotFactory) -> None:
    async with make_bot(agents.broken_agent) as h:
        asked = await h.mention(ALICE, "hello")
        [text] = h.texts(asked.ts)
        assert text.startswith("Sorry")
        assert "Traceback" not in text and "/srv/secret" not in text
