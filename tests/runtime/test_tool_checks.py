"""A tool that cannot work is refused when it is built (issue 21), naming the tool and the
parameter, instead of handing the model `<async_generator object ...>` or a schema without types."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Literal

import pytest

from bot import Tool, UsageError


async def stream_logs(service: str) -> AsyncIterator[str]:
    """Stream a service's logs."""
    yield service


def tail_logs(service: str) -> Iterator[str]:
    """Tail a service's logs."""
    yield service


def untyped(service, environment: str) -> str:  # type: ignore[no-untyped-def]
    """Deploy without hints."""
    return f"{service} {environment}"


class Connection:
    """Not something a model can send."""


def connect(target: Connection) -> str:
    """Connect."""
    return str(target)


def undocumented(service: str, environment: Literal["staging", "prod"]) -> str:
    return f"{service} {environment}"


@pytest.mark.parametrize("handler", [stream_logs, tail_logs])
def test_a_generator_is_refused(handler: object) -> None:
    with pytest.raises(UsageError, match=r"Tool `\w+` is a generator"):
        Tool(handler)  # type: ignore[arg-type]


def test_a_parameter_without_a_type_hint_is_named() -> None:
    with pytest.raises(UsageError, match="Tool `untyped` parameter `service` has no type hint"):
        Tool(untyped)


def test_a_type_json_schema_cannot_describe_is_named() -> None:
    with pytest.raises(UsageError, match="Tool `connect` parameter `target` has a type"):
        Tool(connect)


def test_a_missing_docstring_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="handback"):
        tool = Tool(undocumented)
    assert tool.parameters["properties"]["environment"]["enum"] == ["staging", "prod"]
    assert "tool `undocumented` has no docstring" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="handback"):
        Tool(undocumented, description="Deploy a service.")
    assert caplog.text == ""
