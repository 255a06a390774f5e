"""examples/quickstart.py runs as documented, on each backend, and exits by itself."""

from __future__ import annotations

import subprocess
import sys

from .conftest import AppBackend
from .support import ROOT, example_env


def test_the_quickstart_runs_to_the_end(fresh_backend: AppBackend) -> None:
    env = example_env(**fresh_backend.env()) if fresh_backend.id != "sqlite" else example_env()
    command = [sys.executable, "examples/quickstart.py"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "    -> reminding u-42" in lines
    assert sum(" demo.interval " in line for line in lines) == 3
    assert lines[-1] == "done"
