"""Helpers for the example apps' end-to-end tests: real subprocesses, free ports, polling."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[3]
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def example_env(**values: str | None) -> dict[str, str]:
    """The environment minus every SCHEDULE_* variable, plus ``values`` (None values are left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env.update({k: v for k, v in values.items() if v is not None})
    return env


class Process:
    """A child process whose output goes to ``log``; ``stop()`` sends SIGTERM and returns its exit code."""

    def __init__(self, args: list[str], env: Mapping[str, str], log: Path, cwd: Path = ROOT) -> None:
        self.log = log
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, *args], cwd=cwd, env=dict(env), stdout=self._out, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"did not exit within {timeout}s of SIGTERM:\n{self.output()}") from None
        finally:
            self._out.close()
        return code
