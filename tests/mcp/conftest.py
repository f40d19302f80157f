"""Real MCP servers for the tests: `ops_server.py` as a subprocess over stdio or streamable
HTTP, its calls counted on its side (one JSON line per call in `OPS_LOG`)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.mcp import Backoff, MCPServer
from bot.testing import OpenAICompatServer

OPS_SERVER = str(Path(__file__).with_name("ops_server.py"))


@dataclass
class Ops:
    """The files an `ops_server.py` process reads and writes."""

    log: Path
    pid: Path
    refuse: Path
    state_key: str | None = None
    """The key the server seals `requestState` with; None: a key of the process alone."""

    def env(self) -> dict[str, str]:
        env = {"OPS_LOG": str(self.log), "OPS_PID": str(self.pid), "OPS_REFUSE": str(self.refuse)}
        if self.state_key is not None:
            env["OPS_STATE_KEY"] = self.state_key
        return env

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """What the server ran, in order (of one tool, if named)."""
        if not self.log.exists():
            return []
        lines = [json.loads(line) for line in self.log.read_text().splitlines() if line]
        return [c for c in lines if tool is None or c["tool"] == tool]

    def stdio(self, name: str = "ops", **options: Any) -> MCPServer:
        options.setdefault("backoff", Backoff(first=0.05, most=0.2))
        options.setdefault("env", self.env())
        return MCPServer.stdio(name, [sys.executable, OPS_SERVER, "stdio"], **options)

    def kill(self) -> int:
        """kill -9 the server process that started last; its pid."""
        pid = int(self.pid.read_text())
        os.kill(pid, signal.SIGKILL)
        return pid


def ops_in(directory: Path, *, state_key: str | None = None) -> Ops:
    return Ops(
        log=directory / "ops.log",
        pid=directory / "ops.pid",
        refuse=directory / "refuse",
        state_key=state_key,
    )


@pytest.fixture
async def model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[Any]:
    """The scripted model behind `openai/scripted` in the config files (`config_files.Script`),
    with the servers' environment (their call logs under `tmp_path`) set for the file's agent."""
    # Here, not at the top: `config_files` imports this module.
    from .config_files import Script, server_env

    async with OpenAICompatServer(Script()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        for name, value in server_env(tmp_path).items():
            monkeypatch.setenv(name, value)
        yield server


@pytest.fixture
def ops(tmp_path: Path) -> Ops:
    return ops_in(tmp_path)


async def until(condition: Callable[[], object], seconds: float = 20.0) -> None:
    """Wait for something another process does (a server restarting, a call logged); bounded."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def ops_http(ops: Ops) -> Iterator[str]:
    """The URL of an `ops_server.py` serving streamable HTTP in a subprocess."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, OPS_SERVER, "http", str(port)],
        env={**os.environ, **ops.env()},
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP MCP server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
