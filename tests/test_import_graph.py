"""The modules of `state`, `blocks` and `bot` import each other one way: their top-level imports
form a DAG, and no function hides an import of a sibling module to break a cycle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("state", "blocks", "bot")

LAZY: dict[str, str] = {
    "bot._cli": "the CLI imports a command's machinery (Bolt, the stores) only when that command "
    "runs, so that `handback --help` and a mistyped command answer at once",
    "bot": "`bot.agent_from_file` brings in the config file reader and with it the MCP SDK: "
    "only for those who read a file, so that `import bot` stays light",
}
"""Modules allowed to import siblings inside functions, and why; not to break a cycle."""


@dataclass(frozen=True, kw_only=True)
class Import:
    module: str
    """The module importing."""
    target: str
    """Our module it imports."""
    line: int


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _targets(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    """Our modules an import statement loads: the module it names and, for `from X import Y`,
    `X.Y` when that is a module."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = _package_of(module, path).split(".")
            anchor = package[: len(package) - node.level + 1]
            base = ".".join(anchor + ([base] if base else []))
        submodules = [f"{base}.{alias.name}" for alias in node.names]
        # `from . import _metrics` loads only the submodule (its package is loaded already);
        # `from .. import Agent` runs the package's `__init__`.
        names = submodules if all(name in MODULES for name in submodules) else [base, *submodules]
    for name in names:
        if name in MODULES:
            yield name


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _top_level(module: str, path: Path) -> Iterator[Import]:
    """Imports run when the module is imported: its body, and blocks in it (a `try`, an `if`),
    but not `if TYPE_CHECKING:` (never run) nor functions and classes."""
    pending: list[ast.stmt] = list(ast.parse(path.read_text()).body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            for target in _targets(module, path, node):
                yield Import(module=module, target=target, line=node.lineno)
        elif isinstance(node, ast.If | ast.Try | ast.With) and not _is_type_checking(node):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    pending.append(child)
            if isinstance(node, ast.Try):
                for handler in node.handlers:
                    pending.extend(handler.body)


def _in_functions(module: str, path: Path) -> Iterator[Import]:
    for function in ast.walk(ast.parse(path.read_text())):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(module, path, node):
                    yield Import(module=module, target=target, line=node.lineno)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, path in MODULES.items():
        for edge in _top_level(module, path):
            if edge.target != module:
                graph[module].add(edge.target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` (its modules in import order), or None when it is a DAG."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = "open"
        stack.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        stack.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def test_the_packages_are_found() -> None:
    assert {"state", "blocks", "bot", "bot.slack", "blocks._answers", "state._keys"} <= set(MODULES)


def test_the_top_level_imports_of_our_modules_form_a_dag() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_dependency_direction_is_state_then_blocks_then_bot() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in _graph().items()
        for target in targets
        if PACKAGES.index(target.split(".")[0]) > PACKAGES.index(module.split(".")[0])
    ]
    assert wrong == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_function_imports_a_sibling_module(module: str) -> None:
    hidden = [
        f"{edge.module}:{edge.line} imports {edge.target}"
        for edge in _in_functions(module, MODULES[module])
        if edge.target.split(".")[0] == module.split(".")[0]
    ]
    if module in LAZY:
        assert hidden, f"`{module}` no longer imports lazily: drop it from LAZY"
        return
    assert hidden == []
