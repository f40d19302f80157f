"""Property-based fuzzing of `/slack/events` over real HTTP: whatever arrives, signed or not, the
bot answers below 500, never crashes, and never claims or resumes anything it should not.

A real bot (on a real store) waits on one approval card while hypothesis throws at it: unsigned
garbage, signed JSON of any shape, real click payloads with hostile changes (other interaction
ids, channels, teams, users, actions, wrong types, huge and unicode-edge strings), modal
submissions and event envelopes of any shape. After every case the inbox is drained, so work the
bot accepted is done before the next case, and the card must still be pending with the tool not
run. `HANDBACK_FUZZ_EXAMPLES` scales the run (`HANDBACK_FUZZ_EXAMPLES=10000` for a long one).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from contextlib import AsyncExitStack
from typing import Any, TypeVar
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from blocks import ACTION_APPROVE
from bot import Agent, Tool
from bot.slack import SlackBot, load_settings
from state import Store, open_store

from .._local_slack import TestSlack
from . import agents
from .conftest import ALICE, BOB, CHANNEL, Clock

pytestmark = pytest.mark.fuzz

_T = TypeVar("_T")
# Cases per run, shared by the two stores (each test runs on both): clicks get half, the other
# two tests a quarter each.
EXAMPLES = int(os.environ.get("HANDBACK_FUZZ_EXAMPLES", "2100")) // 2
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}


class Target:
    """A bot with one pending approval card, on an event loop of its own in a thread, so that
    hypothesis (which drives plain functions) can send it one request per example."""

    def __init__(self, store_url: str) -> None:
        self._store_url = store_url
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._stack = AsyncExitStack()
        self.slack: TestSlack
        self.bot: SlackBot
        self.store: Store
        self.card_ts = ""
        self.interaction_id = ""
        self.click: dict[str, Any] = {}
        self.deploys: list[dict[str, str]] = []
        """What this bot's `deploy` did: its own log, so that a call another test's bot made
        late (a daemon thread a busy machine scheduled late) cannot count here."""

    def _agent(self) -> Agent:
        deploys = self.deploys

        def deploy(service: str, environment: str) -> str:
            """Deploy a service."""
            deploys.append({"service": service, "environment": environment})
            return f"deployed {service} to {environment}"

        return Agent(
            name=agents.approval_agent.name,
            model=agents.approval_agent.model,
            tools=[Tool(deploy, requires_approval=True)],
        )

    def run(self, coro: Callable[[], Awaitable[_T]]) -> _T:
        future: Future[_T] = asyncio.run_coroutine_threadsafe(_call(coro), self._loop)
        return future.result(timeout=60)

    def __enter__(self) -> Target:
        self._thread.start()
        self.run(self._start)
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self._stack.aclose)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        self.slack = await self._stack.enter_async_context(TestSlack())
        config = load_settings(
            slack_bot_token=self.slack.bot_token,
            slack_signing_secret=self.slack.signing_secret,
            slack_api_url=self.slack.api_url,
            handback_store=self._store_url,
            handback_approvers=BOB,
        )
        self.store = await self._stack.enter_async_context(open_store(self._store_url))
        self.bot = await self._stack.enter_async_context(
            SlackBot(
                agent=self._agent(),
                store=self.store,
                settings=config,
                clock=Clock(),
                loops=False,
            )
        )
        self.slack.bot_url = await self._stack.enter_async_context(
            self.bot.serve_http("127.0.0.1", 0)
        )
        asked = await self.slack.post_user_message(ALICE, CHANNEL, "deploy api to prod")
        await self.bot.drain()
        cards = [m for m in self.slack.bot_messages(thread_ts=asked.ts) if m.blocks]
        assert cards, "the approval card was not posted"
        self.card_ts = cards[-1].ts
        for block in cards[-1].blocks:
            if str(block.get("block_id", "")).startswith("hb|"):
                self.interaction_id = str(block["block_id"]).split("|")[1]
        assert self.interaction_id
        # The click Bob, an approver, would send: every click case below is this with at least
        # one hostile change, so none of them may approve.
        self.click = self.slack.block_actions_payload(BOB, self.card_ts, ACTION_APPROVE)

    async def send(self, body: str, headers: dict[str, str], *, sign: bool) -> int:
        response = await self.slack.send_raw(body, headers=headers, sign=sign)
        await self.bot.drain()
        return response.status

    async def card_still_pending(self) -> bool:
        record = await self.store.get_interaction(self.interaction_id)
        return record is not None and record.status == "pending" and record.answered_by is None


async def _call(coro: Callable[[], Awaitable[_T]]) -> _T:
    return await coro()


# ------------------------------------------------------------------------------ strategies

_edge_text = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        [
            "",
            "\u202e\u2066evil\u2069",
            "\x00",
            "\ud7ff\ue000\uffff",
            "hb|x|a",
            "hb:approve",
            "<!channel>",
            "<@U0BOB>",
            "x" * 5000,
            "0" * 400,
            "-1",
            "NaN",
            "1e309",
        ]
    ),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    _edge_text,
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(_edge_text, inner, max_size=4)
    ),
    max_leaves=20,
)
_other_id = st.one_of(st.text(min_size=1, max_size=20), st.sampled_from(["C0OTHER", "U0EVE"]))

# Each changes the real click so that it must not answer the card: the field path and the new
# value. (Changes that leave a legitimate click, such as an empty `container` beside a good
# `channel`, belong in the noise below, not here.)
_not_ours = _json.filter(lambda v: not (isinstance(v, str) and v.startswith("hb")))
_not_a_mapping = _json.filter(lambda v: v is not None and not isinstance(v, dict))
_one_poison = st.one_of(
    st.tuples(
        st.just(("actions", 0, "block_id")),
        _other_id.filter(lambda s: "int_" not in s).map(lambda s: f"hb|{s}|a"),
    ),
    st.tuples(st.just(("actions", 0, "block_id")), _not_ours),
    st.tuples(st.just(("actions", 0, "action_id")), _not_ours),
    st.tuples(
        st.just(("user", "id")),
        st.one_of(st.just(ALICE), _other_id, _json).filter(lambda v: v != BOB),
    ),
    st.tuples(st.just(("user",)), _not_a_mapping),
    st.tuples(st.just(("channel", "id")), st.one_of(st.just("C0OTHER"), _not_a_mapping)),
    st.tuples(st.just(("channel",)), st.one_of(st.just({"id": "C0OTHER"}), _not_a_mapping)),
    st.tuples(st.just(("actions",)), _not_a_mapping),
    st.tuples(st.just(("type",)), _json.filter(lambda v: v != "block_actions")),
)
# Both places Slack names the channel moved to another channel: only the stored record can tell.
_elsewhere = st.just(
    [(("channel",), {"id": "C0OTHER", "name": "other"}), (("container", "channel_id"), "C0OTHER")]
)
_poison = st.one_of(_one_poison.map(lambda change: [change]), _elsewhere)
_noise = st.lists(
    st.tuples(
        st.sampled_from(
            [
                ("team",),
                ("team", "id"),
                ("container",),
                ("view",),
                ("message",),
                ("response_url",),
                ("trigger_id",),
                ("actions", 0, "value"),
                ("actions", 0, "type"),
                ("state",),
                ("api_app_id",),
                ("is_enterprise_install",),
            ]
        ),
        _json,
    ),
    max_size=3,
)


def _set(payload: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`payload` with `value` at `path`, creating what is missing; a path through something
    that is not a container replaces it."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        items = list(payload) if isinstance(payload, list) else []
        while len(items) <= head:
            items.append({})
        items[head] = _set(items[head], rest, value)
        return items
    mapping = dict(payload) if isinstance(payload, dict) else {}
    mapping[head] = _set(mapping.get(head), rest, value)
    return mapping


# ------------------------------------------------------------------------------ the tests


@pytest.fixture
def target(store_url: str) -> Iterator[Target]:
    with Target(store_url) as running:
        yield running


def _check(target: Target, status: int) -> None:
    assert status < 500, status
    assert target.deploys == [], "a hostile request ran the tool"
    assert target.run(target.card_still_pending), "a hostile request answered the card"


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def test_hostile_clicks_never_approve(target: Target) -> None:
    @_settings(EXAMPLES // 2)
    @given(poison=_poison, noise=_noise, sign=st.booleans())
    # A blanked channel id once borrowed the container's channel and approved (found in a
    # full-suite run, rare in generation): pinned as an example every run tries.
    @example(poison=[(("channel", "id"), "")], noise=[], sign=True)
    @example(poison=[(("container", "channel_id"), "")], noise=[], sign=True)
    def case(
        poison: list[tuple[tuple[Any, ...], Any]],
        noise: list[tuple[tuple[Any, ...], Any]],
        sign: bool,
    ) -> None:
        payload: Any = target.click
        for path, value in [*noise, *poison]:
            payload = _set(payload, path, value)
        body = urlencode({"payload": json.dumps(payload)})
        status = target.run(lambda: target.send(body, FORM, sign=sign))
        if not sign:
            assert status == 401
        _check(target, status)

    case()
    # The untouched click still works: the fuzzing did not break the bot.
    body = urlencode({"payload": json.dumps(target.click)})
    assert target.run(lambda: target.send(body, FORM, sign=True)) == 200
    assert len(target.deploys) == 1


def test_any_json_signed_or_not_gets_a_clean_answer(target: Target) -> None:
    @_settings(EXAMPLES // 4)
    @given(
        body=st.one_of(
            _json.map(json.dumps),
            _json.map(lambda v: urlencode({"payload": json.dumps(v)})),
            st.text(max_size=200),
        ),
        form=st.booleans(),
        sign=st.booleans(),
    )
    def case(body: str, form: bool, sign: bool) -> None:
        status = target.run(lambda: target.send(body, FORM if form else JSON, sign=sign))
        if not sign:
            assert status == 401
        _check(target, status)

    case()


def test_hostile_events_and_submissions_get_a_clean_answer(target: Target) -> None:
    @_settings(EXAMPLES // 4)
    @given(
        kind=st.sampled_from(["event", "submission"]),
        changes=st.dictionaries(
            st.sampled_from(
                ["type", "user", "text", "ts", "thread_ts", "channel", "subtype", "bot_id", "view"]
            ),
            _json,
            max_size=4,
        ),
    )
    def case(kind: str, changes: dict[str, Any]) -> None:
        if kind == "event":
            event = {"type": "app_mention", "user": ALICE, "text": "hi", "channel": CHANNEL}
            event.update(changes)
            event.setdefault("ts", "1.000001")
            body = json.dumps(target.slack.event_envelope(event))
            headers = JSON
        else:
            view = {"type": "modal", "callback_id": "hb:modal", "private_metadata": "x"}
            payload = {"type": "view_submission", "user": {"id": BOB}, "view": view}
            payload.update(changes)
            body = urlencode({"payload": json.dumps(payload)})
            headers = FORM
        _check(target, target.run(lambda: target.send(body, headers, sign=True)))

    case()


_hostile_id = st.one_of(
    st.text(max_size=8).map(lambda s: s + "\ud800"),
    st.text(max_size=8).map(lambda s: "\udfff" + s),
    st.text(max_size=8).map(lambda s: f"U0{s}\x00"),
    st.just("U" * 10_000),
)
_event_ids = st.sampled_from(
    [
        ("event_id",),
        ("team_id",),
        ("api_app_id",),
        ("event", "user"),
        ("event", "channel"),
        ("event", "ts"),
        ("event", "thread_ts"),
        ("event", "team"),
        ("authorizations", 0, "user_id"),
    ]
)
_click_ids = st.sampled_from(
    [
        ("trigger_id",),
        ("api_app_id",),
        ("team", "id"),
        ("user", "id"),
        ("user", "team_id"),
        ("channel", "id"),
        ("container", "message_ts"),
        ("container", "channel_id"),
        ("actions", 0, "action_ts"),
        ("actions", 0, "block_id"),
        ("actions", 0, "action_id"),
    ]
)


def test_hostile_ids_get_a_4xx_or_an_ignored_event(target: Target) -> None:
    """An id that is not valid text (a lone surrogate), holds a NUL, or is 10,000 characters
    long: a signed event is acked and ignored, a signed click refused, never a 5xx."""

    @_settings(max(EXAMPLES // 8, 20))
    @given(kind=st.sampled_from(["event", "click"]), data=st.data())
    def case(kind: str, data: st.DataObject) -> None:
        value = data.draw(_hostile_id)
        if kind == "event":
            event = {"type": "app_mention", "user": ALICE, "text": "hi", "channel": CHANNEL}
            event["ts"] = "1.000001"
            envelope = target.slack.event_envelope(event)
            body = json.dumps(_set(envelope, data.draw(_event_ids), value))
            headers = JSON
        else:
            payload = _set(target.click, data.draw(_click_ids), value)
            body = urlencode({"payload": json.dumps(payload)})
            headers = FORM
        said = len(target.slack.bot_messages())
        status = target.run(lambda: target.send(body, headers, sign=True))
        assert status == 200 if kind == "event" else 400 <= status < 500, status
        _check(target, status)
        assert len(target.slack.bot_messages()) == said, "a hostile event was taken as a prompt"

    case()
