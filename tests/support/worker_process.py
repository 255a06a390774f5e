"""A worker process (``tests/procs/worker.py``) started for a test, and the fires it recorded."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
#: Debian's libfaketime, the multi-threaded flavour (scripts/ensure-services.sh installs it).
FAKETIME_GLOB = "/usr/lib/*/faketime/libfaketimeMT.so.1"


def as_host(hostname: str) -> list[str]:
    """A command prefix that runs a process as if on a host of its own: its own hostname (UTS
    namespace) and PID namespace, so its worker's node differs from every other's and peers judge
    it by its heartbeat alone, as they would a worker on another machine. ``--kill-child``: a
    SIGKILL of the ``unshare`` process kills the worker too."""
    script = 'hostname "$0" && exec "$@"'
    return ["unshare", "--uts", "--pid", "--fork", "--kill-child", "sh", "-c", script, hostname]


class WorkerProcess:
    """``tests.procs.worker`` with the backend's settings (``overrides``: more settings,
    ``listener_sleep``, and ``SDK_TEST_*`` variables of the worker's own), started and ready.
    ``env`` adds variables; ``host`` runs it as if on a host of that name (:func:`as_host`)."""

    def __init__(
        self,
        backend: Any,
        events: Path,
        *,
        env: dict[str, str] | None = None,
        host: str | None = None,
        **overrides: object,
    ) -> None:
        prefix: Sequence[str] = () if host is None else as_host(host)
        self.host = host
        sleep = overrides.pop("listener_sleep", 0)
        # SDK_TEST_* overrides are the test worker's own variables (tests/procs/worker.py)
        own = {k: str(overrides.pop(k)) for k in [k for k in overrides if k.startswith("SDK_TEST_")]}
        environ = backend.env(**overrides)
        environ.update(own)
        environ.update(SDK_TEST_EVENTS=str(events), SDK_TEST_SLEEP=str(sleep), PYTHONPATH=str(ROOT))
        environ.update(env or {})
        # Its log goes to a file, never to a pipe: nobody drains a pipe while the test runs, and a
        # worker whose warnings fill one blocks in mid-write (its heartbeat stops, its stop hangs).
        self.log_path = _log_path(events, environ.get("SCHEDULE_WORKER_ID") or host)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*prefix, sys.executable, "-m", "tests.procs.worker"],
                env=environ,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        assert line.strip() == "ready", self.log() or line

    def signal_children(self, signum: int) -> None:
        """Send ``signum`` to the worker (inside its namespaces, when it has a host of its own)."""
        if self.host is None:
            self.proc.send_signal(signum)
            return
        pid = self.proc.pid
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            os.kill(int(child), signum)

    def pause(self) -> None:
        """SIGSTOP the worker and return once the kernel shows it stopped (state ``T``)."""
        self.proc.send_signal(signal.SIGSTOP)
        stat = Path(f"/proc/{self.proc.pid}/stat")
        # the state is the field after the parenthesised command name
        assert wait_until(lambda: stat.read_text().rpartition(")")[2].split()[0] == "T", 5), "never stopped"

    def log(self) -> str:
        """What the worker logged (its standard error) so far."""
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> int:
        """SIGTERM the worker (inside its namespaces, when it has a host of its own: ``unshare``
        would die of it and kill the worker); its exit code."""
        self.signal_children(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            before = len(self.log())
            self.signal_children(signal.SIGUSR1)  # its threads' stacks, to its log
            wait_until(lambda: "Thread 0x" in self.log()[before:], 3)
            tail = self.log()[-8000:]
            # a worker left running keeps its pump's lead and its connections: later tests on
            # this test process would fail for it
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"no exit within 15 s of SIGTERM; the worker's log:\n{tail}") from None


def _log_path(events: Path, name: str | None) -> Path:
    """A log file of its own beside ``events`` for each worker process."""
    stem = f"{events.stem}.{name or 'worker'}"
    for n in range(1000):
        path = events.with_name(f"{stem}.{n}.log")
        if not path.exists():
            return path
    raise AssertionError(f"too many worker logs beside {events}")


def fired(events: Path) -> Counter[str]:
    if not events.exists():
        return Counter()
    return Counter(line.split()[0] for line in events.read_text().splitlines() if line.strip())


def faketime_env(shift: str) -> dict[str, str]:
    """The environment that shifts a process's wall clock by ``shift`` (``"+2s"``) with
    libfaketime; its monotonic clock is left alone. Fails when libfaketime is not installed."""
    found = sorted(glob.glob(FAKETIME_GLOB))
    assert found, "libfaketime is missing: run scripts/ensure-services.sh (Debian package libfaketime)"
    return {
        "LD_PRELOAD": found[0],
        "FAKETIME": shift,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_NO_CACHE": "1",
    }
