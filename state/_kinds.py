"""The kinds of interaction handback itself knows, as one `Literal`: code that branches on a kind
matches `kind_of(record)` and ends in `assert_never`, and a yes/no question is one predicate."""

from __future__ import annotations

from typing import Literal, Protocol, get_args

__all__ = ["InteractionKind", "is_approval", "is_elicitation", "kind_of"]

InteractionKind = Literal[
    "approval", "confirm", "ask_user", "ask_user_multi", "elicitation", "custom"
]
"""An approval of a tool call, a yes/no question (`confirm`), a question with one or several
answers (`ask_user`, `ask_user_multi`), an MCP server's question (`elicitation`); `custom` is any
other kind a tool names in `suspend(kind=...)`, shown and answered from its payload and schema."""

_KNOWN: frozenset[str] = frozenset(get_args(InteractionKind)) - {"custom"}


class _Kinded(Protocol):
    @property
    def kind(self) -> str: ...


def kind_of(record: _Kinded) -> InteractionKind:
    """The record's kind as handback handles it (a tool's own kind is `custom`)."""
    kind = record.kind
    match kind:
        case "approval" | "confirm" | "ask_user" | "ask_user_multi" | "elicitation":
            return kind
        case _:
            return "custom"


def is_approval(record: _Kinded) -> bool:
    """Whether the record asks for the approval of a tool call."""
    return record.kind == "approval"


def is_elicitation(record: _Kinded) -> bool:
    """Whether the record is an MCP server's question to the person (an elicitation)."""
    return record.kind == "elicitation"
