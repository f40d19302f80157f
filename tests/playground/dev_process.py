"""`handback dev` as a person starts it, for the tests that drive it over HTTP: a subprocess on a
free port, its URL read from what it prints, stopped with Ctrl+C."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def command() -> list[str]:
    """The installed `handback` script, or the module it runs when there is none (a checkout
    without the package installed)."""
    script = Path(sys.executable).with_name("handback")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "bot._cli"]


def handback_main() -> Callable[[Sequence[str]], int]:
    """What the installed `handback` script runs (its console-script entry point), for a test
    that runs a command in this process so that it controls the process itself (its temp dir)."""
    [script] = entry_points(group="console_scripts", name="handback")
    main: Callable[[Sequence[str]], int] = script.load()
    return main


def offline_env(**extra: str) -> dict[str, str]:
    """This process's environment without an OpenAI key, Slack credentials or a store, so the
    playground runs offline with its own temporary store; `extra` added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLACK_"))}
    env.pop("HANDBACK_STORE", None)
    return env | extra


async def start_dev(
    *args: str, cwd: Path, port: int | None = None, env: dict[str, str] | None = None
) -> asyncio.subprocess.Process:
    """`handback dev ARGS --no-browser --port PORT` (a free port unless given) in `cwd`, with
    `env` (this process's own if None), its output piped."""
    return await asyncio.create_subprocess_exec(
        *command(),
        "dev",
        *args,
        "--no-browser",
        "--port",
        str(free_port() if port is None else port),
        cwd=cwd,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_url(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    async with asyncio.timeout(30):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise AssertionError("handback dev exited before printing its URL")
            found = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            if found:
                return found.group(1)


async def stop_dev(process: asyncio.subprocess.Process, *, seconds: float) -> tuple[str, str]:
    """Ctrl+C (the playground closes its MCP servers and its store), then what it printed:
    stdout and stderr."""
    if process.returncode is None:
        process.send_signal(signal.SIGINT)
    async with asyncio.timeout(seconds):
        out, err = await process.communicate()
    return out.decode(), err.decode()
