"""What every half of `RedisStore` may call on the store: declared once here, defined by
`RedisStore` itself (the halves are mixins, each one concept: answers, nudges, inbox, grants)."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from ._keys import RedisKeys
from ._records import InteractionClaim, InteractionRecord
from ._redis_cluster import RedisClient

__all__ = ["RedisPart"]

_T = TypeVar("_T")


class RedisPart:
    """The base of `RedisStore`'s halves; calling one of these on a half alone is a bug."""

    _keys: RedisKeys

    def _live(self) -> RedisClient:
        """The client, once the store is open."""
        raise NotImplementedError

    async def _send(self, call: Awaitable[_T]) -> _T:
        """One round trip, its errors turned into the store's."""
        raise NotImplementedError

    def _decode_ix(self, interaction_id: str, values: Sequence[Any]) -> InteractionRecord:
        """An interaction from its hash's fields as the scripts return them."""
        raise NotImplementedError

    def _interaction_claim(self, interaction_id: str, reply: Sequence[Any]) -> InteractionClaim:
        """A claim script's reply, read."""
        raise NotImplementedError
