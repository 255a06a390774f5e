"""A PostgreSQL server of a test's own, on a free loopback port, that the test may stop and start.

Fault tests stop the database mid-run. Stopping the shared server on 127.0.0.1:5432 would break
every other test run on the machine (and the other workers of this one), so they get a private
cluster instead: ``initdb`` into a temporary folder, ``postgres`` on its own port, trust auth.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from tests.support.services import require_nats


def _bin(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.iterdir(), key=lambda p: int(p.name)) if root.is_dir() else []
    if not versions:
        raise RuntimeError(f"{name} not found: install PostgreSQL (scripts/ensure-services.sh)")
    return str(versions[-1] / "bin" / name)


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; run as the ``postgres`` user then."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


class PrivatePostgres:
    """``initdb`` once, then ``start()`` / ``stop()`` as often as a test likes; ``close()`` removes it."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="sdk_pg_"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        subprocess.run(
            _as_postgres([_bin("initdb"), "-D", str(self.directory / "data"), "-A", "trust", "-U", "postgres",
                          "--no-sync", "-E", "UTF8"]),
            check=True, capture_output=True,
        )  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        #: ``-c`` settings every start passes to the server (e.g. ``wal_writer_delay``).
        self.settings: dict[str, str] = {}

    @property
    def admin(self) -> str:
        """libpq URL of the server's ``postgres`` database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str = "postgres") -> str:
        """SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def start(self, timeout: float = 30.0) -> None:
        self.process = subprocess.Popen(
            _as_postgres([_bin("postgres"), "-D", str(self.directory / "data"), "-p", str(self.port),
                          "-k", str(self.directory), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                          *(f"-c{name}={value}" for name, value in self.settings.items())]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.admin, connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the postmaster): sessions are cut, as when a server goes away."""
        if self.process is not None:
            pid = int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
            os.kill(pid, signal.SIGINT)  # the postmaster itself: ``runuser`` does not pass signals on
            self.process.wait(timeout=30)
            self.process = None

    def crash(self) -> None:
        """Immediate shutdown (SIGQUIT to the postmaster, ``pg_ctl stop -m immediate``), then start
        again: as after a crash, the commits whose WAL was not written yet (``synchronous_commit``
        off) are lost; the server recovers from its WAL."""
        assert self.process is not None
        pid = int((self.directory / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)
        self.process.wait(timeout=30)
        self.process = None
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


class PrivateNats:
    """A NATS JetStream server of a test's own (free loopback port, its own store folder)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"nats://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        server = shutil.which("nats-server") or "/usr/sbin/nats-server"
        self.process = subprocess.Popen(
            [server, "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", str(self.directory)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while True:
            try:
                require_nats("127.0.0.1", self.port)
                return
            except RuntimeError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None
