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


# Runs the quickstart with every optional extra's package made unimportable, as after README's
# `pip install -e .` (no extras): the embedded default must not need any of them.
_WITHOUT_EXTRAS = """
import importlib.abc, runpy, sys
HIDDEN = {"psycopg", "rq", "redis", "nats", "prometheus_client", "aiosqlite", "greenlet"}
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)")
        return None
sys.meta_path.insert(0, Hide())
runpy.run_path("examples/quickstart.py", run_name="__main__")
"""


def test_the_quickstart_needs_no_optional_extra() -> None:
    command = [sys.executable, "-c", _WITHOUT_EXTRAS]
    result = subprocess.run(command, cwd=ROOT, env=example_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == "done"
