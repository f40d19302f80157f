"""Log lines: JSON or text, with the ids bound to the task, and never a secret."""

from __future__ import annotations

import asyncio
import json
import logging
import sys

import pytest

# The log formatters and the redacting filter, tested as units.
from bot._logging import JsonFormatter, Redactor, TextFormatter, bind

SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"


def _record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise RuntimeError(f"failed with {SIGNING_SECRET}")
        except RuntimeError:
            exc_info = sys.exc_info()
    return logging.LogRecord("handback.test", logging.WARNING, __file__, 1, message, args, exc_info)


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("token xoxb-123-456-abcDEF in a message", "xoxb-123-456-abcDEF"),
        ("xoxp-1-2-3 and xapp-1-A0-123-abc", "xapp-1-A0-123-abc"),
        ("the model key sk-proj-abcdefghijklmnopqrstu", "sk-proj-abcdefghijklmnopqrstu"),
        ("store rediss://default:hunter2hunter2@cache:6380/0", "hunter2hunter2"),
        (f"secret={SIGNING_SECRET}!", SIGNING_SECRET),
    ],
)
def test_secrets_and_token_shapes_are_redacted(text: str, gone: str) -> None:
    redact = Redactor([SIGNING_SECRET])
    for formatter in (JsonFormatter(redact), TextFormatter(redact)):
        line = formatter.format(_record("%s", text))
        assert gone not in line and "[redacted]" in line


def test_json_lines_carry_the_ids_bound_to_their_task() -> None:
    formatter = JsonFormatter(Redactor([SIGNING_SECRET]))

    async def work(item: str) -> str:
        bind(work_item=item, run_id=f"run-{item}")
        await asyncio.sleep(0)
        return formatter.format(_record("took %s", item, exc=True))

    async def both() -> list[str]:
        return list(await asyncio.gather(work("1"), work("2")))

    lines = [json.loads(line) for line in asyncio.run(both())]
    assert [(line["work_item"], line["run_id"]) for line in lines] == [
        ("1", "run-1"),
        ("2", "run-2"),
    ]
    assert lines[0]["message"] == "took 1" and lines[0]["level"] == "WARNING"
    assert "RuntimeError" in lines[0]["exception"]
    assert SIGNING_SECRET not in lines[0]["exception"]
