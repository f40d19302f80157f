"""A tool that cannot work is refused when it is built (issue 21), naming the tool and the
parameter, instead of handing the model `<async_generator object ...>` or a schema without types."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import Literal

import pytest

from bot import (
    Agent,
    Tool,
    UsageError,
)
from bot.testing import FunctionModel


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


def test_tool_definitions_that_cannot_work_are_refused() -> None:
    def ok() -> str:
        return "ok"

    for bad_name in ["名前", "café", "has space", "dot.ted", "x" * 65]:
        with pytest.raises(UsageError, match="Tool name"):
            Tool(ok, name=bad_name)
    assert Tool(ok, name="x" * 64).name == "x" * 64
    with pytest.raises(UsageError, match="Tool name"):
        Tool(lambda: 1)  # `<lambda>`

    def star(*hosts: str) -> str:
        return ""

    def kwargs(**options: str) -> str:
        return ""

    def positional(host: str, /) -> str:
        return host

    def private(_host: str) -> str:
        return _host

    for handler, word in [
        (star, "args"),
        (kwargs, "kwargs"),
        (positional, "positional"),
        (private, "_host"),
    ]:
        with pytest.raises(UsageError, match=word):
            Tool(handler)

    def other() -> str:
        return "other"

    with pytest.raises(UsageError, match="two tools named `ok`"):
        Agent(name="a", model=FunctionModel(lambda m: ""), tools=[ok, Tool(other, name="ok")])


def test_parameter_names_that_shadow_basemodel_attributes(recwarn: pytest.WarningsRecorder) -> None:
    def tool(json: str, copy: bool = False) -> str:
        return json

    made = Tool(tool)
    assert made.parse_arguments('{"json": "x"}') == {"json": "x", "copy": False}
    assert not [w for w in recwarn if "shadows" in str(w.message)]
