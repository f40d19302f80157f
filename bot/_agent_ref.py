"""Finding the agent to serve: `MODULE:ATTR`, imported the way uvicorn imports `module:app`.

Its own module so that the command line and the playground both use it without importing each
other.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from ._agent import Agent
from ._errors import UsageError

__all__ = ["DEFAULT_AGENT", "AgentRefError", "load_module_agent", "shadowing"]

DEFAULT_AGENT = "bot.chatops:agent"

_OUR_PACKAGES = ("bot", "blocks", "state")
"""handback's import packages: a module of the same name in the agent's folder is never
imported (ours are, first), so the agent's own code would get ours instead of it."""


class AgentRefError(UsageError):
    """`MODULE:ATTR` does not name an `Agent`; the message says why in one line."""


def load_module_agent(ref: str) -> Agent:
    """The `Agent` at `MODULE:ATTR`, imported the way uvicorn imports `module:app` (a config
    file is `bot._config_file.load_agent`'s)."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise AgentRefError(f"`{ref}` is not MODULE:ATTR (for example `{DEFAULT_AGENT}`)")
    shadowing(Path.cwd())
    if os.getcwd() not in sys.path:
        # Like uvicorn, so `handback run myagent:agent` finds myagent.py in the current folder.
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name and module_name.startswith(error.name):
            raise AgentRefError(f"cannot import module `{module_name}`: {error}") from None
        raise AgentRefError(f"importing `{module_name}` failed: {error}") from None
    except Exception as error:
        raise AgentRefError(
            f"importing `{module_name}` failed: {type(error).__name__}: {error}"
        ) from None
    target: object = module
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AgentRefError(f"module `{module_name}` has no attribute `{attr}`") from None
    if not isinstance(target, Agent):
        raise AgentRefError(f"`{ref}` is a {type(target).__name__}, not a bot.Agent")
    return target


def shadowing(folder: Path) -> None:
    """Raise `AgentRefError` when `folder` (where the agent's module is imported from) holds a
    module named like one of handback's packages: `bot.py` there is never imported, since ours
    is, so `handback run bot:agent` or the agent's `import state` would get ours."""
    for name in _OUR_PACKAGES:
        for candidate in (folder / f"{name}.py", folder / name / "__init__.py"):
            ours = Path(importlib.import_module(name).__file__ or "").resolve()
            if candidate.is_file() and candidate.resolve() != ours:
                raise AgentRefError(
                    f"`{candidate.relative_to(folder)}` in {folder} has the name of handback's "
                    f"own `{name}` package, which hides it: rename it (for example to "
                    f"`my{name}.py`) and import it by that name"
                )
