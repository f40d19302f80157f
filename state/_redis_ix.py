"""How a Redis script reads an interaction's hash: its fields, in the order the store decodes
them, and the Lua function that reads them in that order."""

from __future__ import annotations

from ._codec import INTERACTION_OVERLAY

__all__ = ["IX_FIELDS", "LUA_READ_IX"]

IX_FIELDS = ("rec", *INTERACTION_OVERLAY)
LUA_READ_IX = (
    "local function read_ix(key) return redis.call('HMGET', key, "
    + ", ".join(f"'{name}'" for name in IX_FIELDS)
    + ") end\n"
)
