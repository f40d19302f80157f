"""The options a person picks from, always taken from the stored interaction."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from state import InteractionRecord, kind_of

from ._text import cut, slack_len, to_display

__all__ = [
    "BUTTON_MAX_OPTIONS",
    "CHECKBOX_MAX_OPTIONS",
    "OPTION_LIMIT",
    "PAGE_SIZE",
    "Choices",
    "choices_of",
    "is_boolean",
]

OPTION_LIMIT: Final = 75
"""Slack's limit on an option's text (and, to be safe, on a button's)."""
PAGE_SIZE: Final = 100
"""Slack's limit of options per select menu."""
BUTTON_MAX_OPTIONS: Final = 5
_BUTTON_MAX_LABEL: Final = 30
CHECKBOX_MAX_OPTIONS: Final = 10


@dataclass(kw_only=True, frozen=True)
class Choices:
    """The stored options of an interaction, in order; a reference is an index into `values`."""

    values: tuple[Any, ...]
    multiple: bool
    """True when the answer is a list of options (`ask_user_multi`, array schemas)."""

    @cached_property
    def labels(self) -> tuple[str, ...]:
        return tuple(to_display(value) for value in self.values)

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.values) // PAGE_SIZE))

    @property
    def as_buttons(self) -> bool:
        """A few short options read best as one button each."""
        return (
            not self.multiple
            and 0 < len(self.values) <= BUTTON_MAX_OPTIONS
            and all(0 < slack_len(label) <= _BUTTON_MAX_LABEL for label in self.labels)
        )

    @property
    def as_checkboxes(self) -> bool:
        return self.multiple and 0 < len(self.values) <= CHECKBOX_MAX_OPTIONS

    def numbered(self, indexes: range) -> bool:
        """Whether labels in `indexes` need numbers: when one is cut, numbers tie it to the
        option spelled out in full elsewhere."""
        return any(slack_len(self.labels[index]) > OPTION_LIMIT for index in indexes)

    def is_cut(self, index: int) -> bool:
        """Whether the numbered label of option `index` had to be cut."""
        return slack_len(f"{index + 1}. {self.labels[index]}") > OPTION_LIMIT

    def label(self, index: int, *, numbered: bool) -> str:
        """The text of option `index` on a button, select or checkbox."""
        label = self.labels[index] or "(empty)"
        return cut(f"{index + 1}. {label}" if numbered else label, OPTION_LIMIT)

    def page_range(self, page: int) -> range:
        start = self.clamp(page) * PAGE_SIZE
        return range(start, min(start + PAGE_SIZE, len(self.values)))

    def clamp(self, page: int) -> int:
        return min(max(page, 0), self.pages - 1)


def _schema_type(schema: dict[str, Any] | None) -> Any:
    return None if schema is None else schema.get("type")


def is_boolean(record: InteractionRecord) -> bool:
    """A yes/no answer: `confirm`, or any kind whose schema is a boolean."""
    return kind_of(record) == "confirm" or _schema_type(record.response_schema) == "boolean"


def choices_of(record: InteractionRecord) -> Choices | None:
    """The options of `record`, or None when it is not a pick-from-a-list interaction.

    The payload's `options` come first (that is what the person was asked); otherwise the
    schema's `enum`, or `items.enum` for an array answer.
    """
    if kind_of(record) in ("approval", "confirm") or is_boolean(record):
        return None
    schema = record.response_schema or {}
    multiple = kind_of(record) == "ask_user_multi" or schema.get("type") == "array"
    options = record.payload.get("options")
    if isinstance(options, list) and options:
        return Choices(values=tuple(options), multiple=multiple)
    enum = schema.get("enum")
    if not multiple and isinstance(enum, list) and enum:
        return Choices(values=tuple(enum), multiple=False)
    items = schema.get("items")
    if multiple and isinstance(items, dict):
        item_enum = items.get("enum")
        if isinstance(item_enum, list) and item_enum:
            return Choices(values=tuple(item_enum), multiple=True)
    return None
