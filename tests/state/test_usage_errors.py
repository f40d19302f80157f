"""Developer mistakes against a store raise the one `UsageError`."""

from __future__ import annotations

from typing import Any

import pytest

from state import Store

from ..conftest import answer_only


async def test_developer_mistakes_raise_the_one_usage_error(store: Store) -> None:
    """A store called in a way that can never work raises `UsageError` (drawn once, in `state`,
    and re-exported by `bot`): under `HandbackError`, and a `ValueError` and a `TypeError` both,
    so code written against either keeps catching it."""
    import bot
    from state import HandbackError, UsageError

    assert bot.UsageError is UsageError
    mistakes: list[Any] = [
        lambda: answer_only(store, "ix", answer=1, answered_by="U", now=float("nan")),
        lambda: store.acquire_thread("C1", "1.1", owner="", ttl=1),
        lambda: store.acquire_thread("C1", "1.1", owner="a", ttl=0),
        lambda: store.enqueue("event", "not a dict"),  # type: ignore[arg-type]
        lambda: store.take("", count=1),
        lambda: store.close_interaction("ix", status="answered", now=1.0),
    ]
    for mistake in mistakes:
        with pytest.raises(UsageError) as caught:
            await mistake()
        assert isinstance(caught.value, HandbackError)
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
