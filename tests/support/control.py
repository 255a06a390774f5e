"""Stop and start the real services, for fault tests. Always restart in a ``finally`` block."""

from __future__ import annotations

import subprocess
import time

import psycopg


def _pg_version() -> str:
    return subprocess.run(
        ["ls", "/etc/postgresql"], capture_output=True, text=True, check=True
    ).stdout.split()[0]


def stop_postgres() -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", "stop", "-m", "fast"],
        check=True,
    )


def start_postgres(timeout: float = 30.0) -> None:
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", _pg_version(), "main", "start"], check=False
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect("postgresql://postgres@127.0.0.1:5432/test", connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
