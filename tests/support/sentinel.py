"""A Redis primary, its replica and three Sentinels of a test's own, on free loopback ports.

Failover tests kill the primary with SIGKILL; doing that to the shared server on 127.0.0.1:6379
would break every other test run, so they start this set instead (``redis-server`` and
``redis-sentinel``, Debian's packages, installed by scripts/ensure-services.sh). The Sentinels
judge a server down after ``DOWN_AFTER_MS`` and need two of three to agree.

To make a failover lose writes for real, :meth:`SentinelCluster.cut_replication` stops the
replica's process (SIGSTOP) and has the primary drop its link to it: whatever is written to the
primary afterwards never reaches the replica. :meth:`SentinelCluster.kill_primary` then kills the
primary (SIGKILL) and lets the replica run again; the Sentinels promote it, without those writes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from tests.support.waiting import wait_until

SERVICE = "sdkprimary"
DOWN_AFTER_MS = 1000


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: install it (scripts/ensure-services.sh)")
    return found


class SentinelCluster:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.primary_port, self.replica_port = _free_port(), _free_port()
        self.sentinel_ports = [_free_port() for _ in range(3)]
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The SDK's URL of the service: the three Sentinels, the service name, db 0."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}/0"

    def client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_connect_timeout=1, socket_timeout=2)

    def start(self) -> SentinelCluster:
        self._server(self.primary_port)
        self._server(self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port))
        for port in self.sentinel_ports:
            conf = self.directory / f"sentinel-{port}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 10000\n"
                f"sentinel parallel-syncs {SERVICE} 1\n"
            )
            self._spawn(port, [_binary("redis-sentinel"), str(conf)])
        ready = wait_until(self._ready, 30)
        assert ready, "the Sentinels never saw the replica and each other"
        return self

    def _server(self, port: int, *extra: str) -> None:
        folder = self.directory / str(port)
        folder.mkdir()
        self._spawn(port, [
            _binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(folder), *extra,
        ])  # fmt: skip

    def _spawn(self, port: int, command: list[str]) -> None:
        self.processes[port] = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _ready(self) -> bool:
        try:
            if self.client(self.replica_port).info("replication").get("master_link_status") != "up":
                return False
            for port in self.sentinel_ports:
                sentinel = self.client(port)
                if (
                    len(sentinel.sentinel_slaves(SERVICE)) != 1
                    or len(sentinel.sentinel_sentinels(SERVICE)) != 2
                ):
                    return False
        except redis.RedisError:
            return False
        return True

    def primary(self) -> int:
        """The port the Sentinels name as the primary now."""
        _, port = self.client(self.sentinel_ports[0]).sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def synced(self) -> bool:
        """The replica has received everything written to the primary so far."""
        return int(self.client(self.primary_port).execute_command("WAIT", 1, 5000)) == 1

    def cut_replication(self) -> None:
        """From now on, writes to the primary do not reach the replica (see the module docstring)."""
        os.kill(self.processes[self.replica_port].pid, signal.SIGSTOP)
        self.client(self.primary_port).client_kill_filter(_type="replica")

    def kill_primary(self) -> None:
        """SIGKILL the primary, then let the (cut-off) replica run again."""
        process = self.processes.pop(self.primary_port)
        process.kill()
        process.wait(timeout=10)
        os.kill(self.processes[self.replica_port].pid, signal.SIGCONT)

    def wait_failover(self, timeout: float = 30.0) -> float:
        """Wait until the Sentinels name the replica the primary and it accepts writes; return
        when (``time.time()``)."""

        def promoted() -> bool:
            try:
                if self.primary() != self.replica_port:
                    return False
                role = self.client(self.replica_port).info("replication").get("role")
            except redis.RedisError:
                return False
            return role == "master"

        assert wait_until(promoted, timeout), "the Sentinels did not fail over"
        return time.time()

    def close(self) -> None:
        for process in self.processes.values():
            try:
                os.kill(process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            process.kill()
            process.wait(timeout=10)
        self.processes.clear()
