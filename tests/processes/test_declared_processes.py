"""Four processes started together with the same declarations: one row per declared name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import Backend

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"app.cleanup", "app.report", "app.tick", "app.warmup"}


def test_four_processes_syncing_at_once_make_one_row_per_name(backend: Backend, tmp_path: Path) -> None:
    go = tmp_path / "go"
    env = backend.env(listener_modules="tests.support.declared_v1")
    env.update(SDK_TEST_GO=str(go), PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.procs.declared_sync"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    go.touch()
    plans = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        plans.append(json.loads(out))
    actions = sorted(tuple(sorted({i["action"] for i in p["items"]})) for p in plans)
    assert actions == [("add",), ("unchanged",), ("unchanged",), ("unchanged",)]
    h = backend.harness()
    jobs = h.service.list(status=["pending", "active", "paused"], limit=100).items
    assert sorted(j.topic for j in jobs) == sorted(NAMES)
    stored = h.container.declared_rows().read()
    assert sorted(s.name for s, _ in stored) == sorted(NAMES)
    assert {s.job_id for s, _ in stored} == {j.id for j in jobs}
