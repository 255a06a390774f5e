"""The servers bench/soak.py may restart: a PostgreSQL cluster of its own (``initdb`` in a temporary
directory, loopback port 55432 by default, ``pg_ctl``), a PgBouncer of its own in front of it
(transaction pooling, port 56432), and, per sentinel-rq trial, a Redis primary, replica and three
Sentinels of its own (tests/support/sentinel.py). The shared servers (PostgreSQL 5432, PgBouncer
6432) are never restarted; Redis 6379 is only flushed, in a db this soak claimed
(tests/support/services.py's ``RedisDbs``).

PostgreSQL and PgBouncer refuse to run as root: when the soak runs as root they run as the
``postgres`` user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

#: Who runs PostgreSQL and PgBouncer: ``postgres`` when this process is root, else this user.
USER = "postgres" if os.geteuid() == 0 else None


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        for folder in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
            if (folder / name).exists():
                return str(folder / name)
        raise RuntimeError(f"{name} not found (install PostgreSQL's server binaries)")
    return found


def _wait(check: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(str(check), connect_timeout=2, prepare_threshold=None) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.Error:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up within {timeout:g} s")


class PrivatePostgres:
    """A throwaway cluster: trust auth on 127.0.0.1, fsync on (a restart must not lose commits)."""

    def __init__(self, port: int = 55432) -> None:
        self.port = port
        self.folder = Path(tempfile.mkdtemp(prefix="sdk-soak-pg-"))
        self.data = self.folder / "data"
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")

    @property
    def admin(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str, port: int | None = None) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{port or self.port}/{database}"

    def start(self) -> PrivatePostgres:
        subprocess.run(
            [_binary("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True, stdout=subprocess.DEVNULL, cwd=self.folder, user=USER, group=USER,
        )  # fmt: skip
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n"
                "max_connections = 200\nshared_buffers = 64MB\n"
            )
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        subprocess.run(
            [_binary("pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "log"), "-w", "-t", "60",
             *extra, action],
            check=True, stdout=subprocess.DEVNULL, cwd=self.folder, user=USER, group=USER,
        )  # fmt: skip
        if action != "stop":
            _wait(self.admin, f"PostgreSQL on port {self.port}")

    def restart(self) -> None:
        """``pg_ctl restart -m immediate``: every session is cut; the server recovers from its WAL."""
        self._pg_ctl("restart", "-m", "immediate")

    def create(self, name: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')

    def drop(self, name: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self, keep: bool = False) -> None:
        """Stop the server; remove its folder unless ``keep`` (``pg_ctl -D <folder>/data start``
        brings it back, to look at what a trial left)."""
        try:
            self._pg_ctl("stop", "-m", "fast")
        finally:
            if not keep:
                shutil.rmtree(self.folder, ignore_errors=True)


class PrivatePgBouncer:
    """PgBouncer in transaction pooling in front of a :class:`PrivatePostgres`."""

    def __init__(self, postgres: PrivatePostgres, port: int = 56432) -> None:
        self.postgres, self.port = postgres, port
        self.conf = postgres.folder / "pgbouncer.ini"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivatePgBouncer:
        self.conf.write_text(
            f"[databases]\n* = host=127.0.0.1 port={self.postgres.port} user=postgres\n\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = any\nadmin_users = postgres\npool_mode = transaction\n"
            "max_client_conn = 2000\ndefault_pool_size = 20\nserver_idle_timeout = 10\n"
            f"logfile = {self.postgres.folder / 'pgbouncer.log'}\n"
        )
        if os.geteuid() == 0:
            shutil.chown(self.conf, "postgres", "postgres")
        pgbouncer = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.process = subprocess.Popen(
            [pgbouncer, "-q", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd=self.postgres.folder, user=USER, group=USER,
        )  # fmt: skip
        _wait(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", f"PgBouncer on port {self.port}")
        return self

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
