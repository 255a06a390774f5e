"""Fixtures for the rq substrate's own tests: settings on the run's Redis db, a private
redis-server that tests may stop and restart, and worker subprocesses."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from schedule_sdk.substrates.rq.pump import DuePump
from tests.harness import Harness
from tests.support import services
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def redis_url(redis_base_url: str) -> str:
    services.RedisDbs.flush(redis_base_url)  # FLUSHDB of this run's own db only
    return redis_base_url


@pytest.fixture
def rq_settings(tmp_path: Path, redis_url: str) -> dict[str, Any]:
    return {
        "database_url": f"sqlite:///{tmp_path / 'jobs.db'}",
        "substrate": "rq",
        "redis_url": redis_url,
        "rq_queue": services.queue_name("rqt"),
        "lease_seconds": 3.0,
        "stop_timeout": 2.0,
    }


@contextlib.contextmanager
def made_harnesses() -> Iterator[Callable[..., Harness]]:
    """``make(settings, **overrides)`` builds a Harness; every one made is closed at the end."""
    made: list[Harness] = []

    def make(settings: dict[str, Any], **overrides: Any) -> Harness:
        harness = Harness({**settings, **overrides})
        made.append(harness)
        return harness

    try:
        yield make
    finally:
        for harness in made:
            harness.close()


@pytest.fixture
def harnesses() -> Iterator[Callable[..., Harness]]:
    with made_harnesses() as make:
        yield make


class PrivateRedis:
    """A real redis-server of our own on a free port, so stopping it disturbs no other test run;
    ``persistent=False``: with no persistence at all (a restart comes back empty)."""

    def __init__(self, directory: Path, *, persistent: bool = True) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.command = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "yes" if persistent else "no", "--appendfsync", "always", "--dir", str(directory),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis(port=self.port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut the server down (its append-only file, if persistent, keeps the data for ``start``)."""
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def volatile_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    """A private redis-server without persistence: restarted, it comes back empty."""
    server = PrivateRedis(tmp_path, persistent=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def env_of(settings: dict[str, Any], **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env.update({f"SCHEDULE_{k.upper()}": str(v) for k, v in settings.items() if v is not None})
    env.update(extra)
    env["PYTHONPATH"] = str(ROOT)
    return env


def spawn_worker(
    settings: dict[str, Any], events: Path, log: Path | None = None, **extra: str
) -> subprocess.Popen[str]:
    """tests/procs/worker.py with these settings; returns once it printed "ready". With ``log``,
    it logs at INFO level to that file (else its warnings go to this process's standard error)."""
    if log is not None:
        extra["SDK_TEST_LOG_INFO"] = "1"
    with contextlib.ExitStack() as files:
        stderr = None if log is None else files.enter_context(open(log, "ab"))
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.procs.worker"],
            cwd=ROOT,
            env=env_of(settings, SDK_TEST_EVENTS=str(events), **extra),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process


def release_all(harness: Harness, count: int) -> None:
    """Let the SDK's pump alone (no in-process consumer) release ``count`` due fires into the RQ
    queue, for a stock ``rq worker`` to execute."""
    pump = DuePump(harness.container.queue())
    pump.start()
    try:
        assert wait_until(lambda: pump.released == count)
    finally:
        pump.stop()


def run_stock_rq_worker(settings: dict[str, Any], worker_class: str, **env: str) -> None:
    """``rq worker --burst`` of ``worker_class`` on the settings' queue, with the SDK's settings
    and ``env`` in its environment; returns once it has drained the queue."""
    command = [
        sys.executable, "-m", "rq.cli", "worker", "--burst", "--url", settings["redis_url"],
        "--serializer", "rq.serializers.JSONSerializer", "--worker-class", worker_class,
        settings["rq_queue"],
    ]  # fmt: skip
    subprocess.run(
        command, cwd=ROOT, env=env_of(settings, **env), check=True, timeout=120, capture_output=True
    )


def read_events(path: Path) -> list[tuple[str, int, int, int]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in rows]
