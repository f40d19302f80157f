"""The error tree drawn in `bot/_errors.py` is the tree of classes, both ways: every drawn error
exists with the drawn bases, and every error our packages define is drawn."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass

import pytest

import blocks
import bot
import state

# The drawing is the docstring of the private errors module: that is where it is read.
from bot import _errors

NOT_OURS: dict[str, str] = {
    "bot._suspend.Suspended": "the pause: a BaseException no tool's `except Exception:` catches",
    "bot._suspend.Cancelled": "a cancellation: a BaseException for the same reason",
    "bot.playground._limits.Refusal": "LocalSlack playing Slack's error answer, not ours",
}
"""Exceptions our modules define that are not handback's errors, and why."""

_LINE = re.compile(
    r"^(?P<prefix>(?:[│ ]   )*)(?P<branch>[├└]── )?(?P<name>[A-Z]\w*)(?: \((?P<bases>[^)]*)\))?"
    r"(?:\s{2,}|$)"
)


@dataclass(frozen=True, kw_only=True)
class Drawn:
    name: str
    bases: tuple[str, ...]
    """The drawn parent first, then the names in parentheses."""


def parse_tree(doc: str) -> list[Drawn]:
    """The errors of the one fenced drawing in `doc`, with their bases as drawn."""
    blocks_of_text = doc.split("```")
    assert len(blocks_of_text) == 3, "the docstring holds exactly one fenced drawing"
    drawn: list[Drawn] = []
    parents: list[str] = []
    for line in blocks_of_text[1].strip("\n").splitlines():
        match = _LINE.match(line)
        if not drawn:
            assert match is not None and not match["branch"], f"no root in {line!r}"
            depth = 0
        elif match is None or not match["branch"]:
            continue  # the description goes on
        else:
            depth = len(match["prefix"]) // 4 + 1
        extra = tuple(b.strip() for b in (match["bases"] or "").split(",") if b.strip())
        parents[depth:] = [match["name"]]
        parent = (parents[depth - 1],) if depth else ("Exception",)
        drawn.append(Drawn(name=match["name"], bases=parent + extra))
    return drawn


def our_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module of `state`, `blocks` or `bot` defines, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for package in (state, blocks, bot):
        modules = [package.__name__] + [
            info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        ]
        for name in modules:
            module = importlib.import_module(name)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and value.__module__ == name
                    and not value.__name__.startswith("_")
                ):
                    found[f"{name}.{value.__name__}"] = value
    return found


def test_the_drawing_parses_into_a_tree_under_one_root() -> None:
    drawn = parse_tree(_errors.__doc__ or "")
    assert drawn[0] == Drawn(name="HandbackError", bases=("Exception",))
    assert len({d.name for d in drawn}) == len(drawn), "an error is drawn twice"
    by_name = {d.name: d for d in drawn}
    assert by_name["RunNotFound"].bases == ("ResumeError",)
    assert by_name["StoreClosedError"].bases == ("StoreError", "UsageError")


def test_the_parser_reads_depth_and_skips_descriptions() -> None:
    doc = (
        "```\nRoot    r\n├── A (ValueError)  a\n│   │       more about A\n"
        "│   └── B  b\n└── C  c\n```"
    )
    assert parse_tree(doc) == [
        Drawn(name="Root", bases=("Exception",)),
        Drawn(name="A", bases=("Root", "ValueError")),
        Drawn(name="B", bases=("A",)),
        Drawn(name="C", bases=("Root",)),
    ]


def test_every_drawn_error_exists_with_the_drawn_bases() -> None:
    ours = {cls.__name__: cls for cls in our_exceptions().values()}
    for drawn in parse_tree(_errors.__doc__ or ""):
        assert drawn.name in ours, f"`{drawn.name}` is drawn but no module defines it"
        actual = tuple(base.__name__ for base in ours[drawn.name].__bases__)
        assert actual == drawn.bases, f"`{drawn.name}` derives from {actual}, drawn {drawn.bases}"


def test_every_error_our_packages_define_is_drawn_under_the_root() -> None:
    drawn = {d.name for d in parse_tree(_errors.__doc__ or "")}
    ours = {name: cls for name, cls in our_exceptions().items() if name not in NOT_OURS}
    assert set(NOT_OURS) <= set(our_exceptions()), "NOT_OURS names a class that is gone"
    missing = sorted(name for name, cls in ours.items() if cls.__name__ not in drawn)
    assert missing == []
    outside = sorted(name for name, cls in ours.items() if not issubclass(cls, bot.HandbackError))
    assert outside == []


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (state.ApprovalRuleError, bot.UsageError),
        (state.AnswerSchemaError, bot.UsageError),
        (state.StoreClosedError, bot.UsageError),
        (state.StoreURLError, state.StoreError),
        (blocks.InvalidAnswer, bot.HandbackError),
    ],
)
def test_developer_mistakes_are_usage_errors_and_the_rest_runtime_errors(
    error: type[BaseException], kind: type[BaseException]
) -> None:
    assert issubclass(error, kind)
    if kind is not bot.UsageError:
        assert not issubclass(error, bot.UsageError)
