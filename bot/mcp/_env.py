"""`${NAME}` in an MCP server's command, env and headers, read from the environment when the
server is started, so a secret lives in no object, repr or log line."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .._errors import UsageError

__all__ = ["expand", "names_in"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def names_in(text: str) -> list[str]:
    """The variables `text` refers to, in order."""
    return _VARIABLE.findall(text)


def expand(text: str, *, server: str, environ: Mapping[str, str] | None = None) -> str:
    """`text` with each `${NAME}` replaced by the variable's value; a variable that is not set
    raises `UsageError` naming it (never a value)."""
    environ = os.environ if environ is None else environ
    missing = [name for name in names_in(text) if name not in environ]
    if missing:
        listed = ", ".join(f"`{name}`" for name in missing)
        raise UsageError(f"MCP server `{server}`: environment variable {listed} is not set")
    return _VARIABLE.sub(lambda match: environ[match.group(1)], text)
