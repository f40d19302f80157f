"""Each part of `bot/` takes the narrow store Protocol it uses (`RunStore`, `Inbox`, a
combination from `state/_protocol.py`), not the whole `Store`: only the places that own and
open the store hold one. mypy then proves each part touches only what its Protocol has."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

BOT = Path(__file__).resolve().parent.parent / "bot"

OWNERS: dict[tuple[str, str], str] = {
    ("_agent.py", "Agent.__init__"): "the agent keeps the store its runs are saved in and may "
    "close it (`aclose`), so it holds the whole store",
    ("slack/_app.py", "SlackBot.__init__"): "the app owns the store for its life: it lends it "
    "to the agent, hands each part its narrow view and closes it",
}
"""(module under `bot/`, function) -> why it takes the whole `Store`."""


def _names_store(annotation: ast.expr | None) -> bool:
    """Whether an annotation is `Store` itself, or `Store` in a union, optional or string."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _names_store(ast.parse(annotation.value, mode="eval").body)
    return any(
        (isinstance(node, ast.Name) and node.id == "Store")
        or (isinstance(node, ast.Attribute) and node.attr == "Store")
        for node in ast.walk(annotation)
    )


def _store_parameters(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(qualified function, parameter) for each parameter annotated with `Store`; a dataclass
    field counts as a parameter of its class's `__init__`."""

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                for stmt in child.body:
                    if isinstance(stmt, ast.AnnAssign) and _names_store(stmt.annotation):
                        target = ast.unparse(stmt.target)
                        yield f"{prefix}{child.name}.__init__", target
                yield from visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = child.args
                every = [
                    *arguments.posonlyargs,
                    *arguments.args,
                    *arguments.kwonlyargs,
                    *([arguments.vararg] if arguments.vararg else []),
                    *([arguments.kwarg] if arguments.kwarg else []),
                ]
                for argument in every:
                    if _names_store(argument.annotation):
                        yield f"{prefix}{child.name}", argument.arg
                yield from visit(child, f"{prefix}{child.name}.")

    yield from visit(tree, "")


def _taking_store(root: Path) -> set[tuple[str, str]]:
    found = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = path.relative_to(root).as_posix()
        found |= {(module, function) for function, _ in _store_parameters(tree)}
    return found


def test_only_the_stores_owners_take_the_whole_store() -> None:
    taking = _taking_store(BOT)
    assert sorted(taking - OWNERS.keys()) == [], "take the narrow Protocol the code uses"


def test_every_owner_in_the_list_still_takes_the_store() -> None:
    """An entry nobody needs any more goes, so the list only names real owners."""
    assert sorted(OWNERS.keys() - _taking_store(BOT)) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(store: Store) -> None: ...", [("f", "store")]),
        ("def f(*, store: Store | None = None) -> None: ...", [("f", "store")]),
        ("def f(store: 'Store') -> None: ...", [("f", "store")]),
        ("def f(store: state.Store) -> None: ...", [("f", "store")]),
        ("class C:\n    async def m(self, s: Optional[Store]) -> None: ...", [("C.m", "s")]),
        ("@dataclass\nclass S:\n    store: Store | None = None", [("S.__init__", "store")]),
        ("def f(store: RunStore, inbox: Inbox) -> Store: ...", []),
        ("def f(error: StoreError) -> None: ...", []),
    ],
)
def test_the_walk_finds_a_store_annotation_however_it_is_written(
    source: str, expected: list[tuple[str, str]]
) -> None:
    assert list(_store_parameters(ast.parse(source))) == expected


def test_every_store_protocol_is_a_part_of_store_or_has_a_user_in_bot() -> None:
    """A combination nobody takes any more goes (it would only widen the list to read)."""
    # Every protocol the module defines, exported or not: an unexported one nobody uses is found.
    from state import Store, _protocol

    parts = {base.__name__ for base in Store.__mro__}
    used = {
        node.id
        for path in BOT.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name)
    }
    assert sorted(set(_protocol.__all__) - parts - used) == []
