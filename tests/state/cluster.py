"""A real local Redis Cluster for the tests: three masters, no replicas, in a temporary directory.

Started from `redis-server --cluster-enabled yes` and joined with `redis-cli --cluster create`
(no Docker here); `stop()` kills the servers.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis

MASTERS = 3
START_TIMEOUT = 20.0


class ClusterStartError(RuntimeError):
    """The servers or the cluster did not come up; the message says which step failed."""


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_ports(count: int) -> list[int]:
    """Ports free for the server and for its cluster bus (the port plus 10000)."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(20000, 55000)
        if port not in ports and _free(port) and _free(port + 10000):
            ports.append(port)
    return ports


@dataclass(kw_only=True)
class LocalCluster:
    directory: Path
    ports: list[int] = field(default_factory=list)
    servers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def start(self, attempts: int = 3) -> None:
        """Start on free ports; another process taking one of them first costs a retry."""
        for tool in ("redis-server", "redis-cli"):
            if shutil.which(tool) is None:
                raise ClusterStartError(f"`{tool}` is not installed")
        for attempt in range(attempts):
            try:
                self._start()
                return
            except ClusterStartError:
                self.stop()
                if attempt == attempts - 1:
                    raise

    def _start(self) -> None:
        self.servers = []
        self.ports = _free_ports(MASTERS)
        for port in self.ports:
            with (self.directory / f"redis-{port}.log").open("wb") as log:
                self.servers.append(
                    subprocess.Popen(
                        [
                            "redis-server",
                            "--port", str(port),
                            "--bind", "127.0.0.1",
                            "--cluster-enabled", "yes",
                            "--cluster-config-file", str(self.directory / f"nodes-{port}.conf"),
                            "--save", "",
                            "--appendonly", "no",
                            "--daemonize", "no",
                        ],
                        cwd=self.directory,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )  # fmt: skip
        for port in self.ports:
            self._wait(lambda port=port: self._ping(port), f"redis-server on {port}")
        nodes = [f"127.0.0.1:{port}" for port in self.ports]
        created = subprocess.run(
            [
                "redis-cli",
                "--cluster",
                "create",
                *nodes,
                "--cluster-replicas",
                "0",
                "--cluster-yes",
            ],
            capture_output=True,
            timeout=START_TIMEOUT,
        )
        if created.returncode != 0:
            raise ClusterStartError(f"redis-cli --cluster create failed: {created.stdout[-500:]!r}")
        for port in self.ports:
            self._wait(lambda port=port: self._ok(port), f"cluster_state:ok on {port}")

    def stop(self) -> None:
        for server in self.servers:
            server.kill()
        for server in self.servers:
            server.wait(timeout=10)
        self.servers = []

    def drop(self, pattern: str) -> None:
        """Delete the keys matching `pattern` on every master."""
        for port in self.ports:
            client = self._client(port)
            try:
                keys = list(client.scan_iter(match=pattern, count=1000))
                for key in keys:
                    client.delete(key)  # keys of one node may still hash to several slots
            finally:
                client.close()

    def _ping(self, port: int) -> bool:
        client = self._client(port)
        try:
            return bool(client.ping())
        finally:
            client.close()

    def _ok(self, port: int) -> bool:
        client = self._client(port)
        try:
            info = client.cluster("info")
        finally:
            client.close()
        return isinstance(info, dict) and info.get("cluster_state") == "ok"

    @staticmethod
    def _client(port: int) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)

    def _wait(self, check: Callable[[], object], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            for server in self.servers:
                if server.poll() is not None:
                    raise ClusterStartError(f"a redis-server exited (see {self.directory})")
            try:
                if check():
                    return
            except redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ClusterStartError(f"timed out waiting for {what}")
            time.sleep(0.05)
