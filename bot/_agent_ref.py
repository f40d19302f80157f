"""Finding the agent to serve: `MODULE:ATTR`, imported the way uvicorn imports `module:app`.

Its own module so that the command line and the playground both use it without importing each
other.
"""

from __future__ import annotations

import importlib
import os
import sys

from ._agent import Agent
from ._errors import UsageError

__all__ = ["DEFAULT_AGENT", "AgentRefError", "load_agent"]

DEFAULT_AGENT = "bot.chatops:agent"


class AgentRefError(UsageError):
    """`MODULE:ATTR` does not name an `Agent`; the message says why in one line."""


def load_agent(ref: str) -> Agent:
    """The `Agent` at `MODULE:ATTR`, imported the way uvicorn imports `module:app`."""
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise AgentRefError(f"`{ref}` is not MODULE:ATTR (for example `{DEFAULT_AGENT}`)")
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
