"""What the long-running commands write: with ``--log-format json`` every line is JSON (the
worker's own start and stop lines too); ``-v`` shows each migration step, not Alembic's set-up
lines; ``schedule-sdk timer`` logs as ``python -m schedule_sdk.timer`` does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]


def started(args: list[str], tmp_path: Path, ready: str, **env: str) -> str:
    """Start ``args``, wait for ``ready`` in its stderr, stop it with SIGTERM; its stderr."""
    log = tmp_path / "stderr.log"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEDULE_", "TIMER_"))}
    with log.open("wb") as out:
        proc = subprocess.Popen(args, cwd=ROOT, env={**clean, **env}, stdout=subprocess.DEVNULL, stderr=out)
        try:
            assert wait_until(lambda: ready in log.read_text() or proc.poll() is not None), log.read_text()
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(60) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return log.read_text()


@pytest.mark.parametrize("quiet", [[], ["-q"]], ids=["default", "quiet"])
def test_a_json_worker_writes_only_json_lines(tmp_path: Path, quiet: list[str]) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    command = [sys.executable, "-m", "schedule_sdk", "-v", *quiet, "--log-format", "json", "worker"]
    # with -q, the core worker's own INFO record "worker ... started" (-v shows INFO)
    ready = 'started"' if quiet else "started ("
    output = started(command, tmp_path, ready, SCHEDULE_DATABASE_URL=db)
    records = [json.loads(line) for line in output.splitlines()]  # every line parses
    messages = [r["message"] for r in records]
    if quiet:
        assert not any("SIGTERM or Ctrl-C stops it" in m for m in messages), messages
    else:
        notice = next(r for r in records if "SIGTERM or Ctrl-C stops it" in r["message"])
        assert notice["logger"] == "schedule_sdk.cli" and notice["level"] == "INFO"
        assert notice["message"].startswith("worker ") and any(m.startswith("stopping (") for m in messages)
    # -v: each migration step of this first start, none of Alembic's set-up lines
    assert any(m.startswith("Running upgrade") for m in messages)
    assert not [r for r in records if r["logger"] == "alembic.runtime.plugins"]
    assert not [m for m in messages if m.startswith(("Context impl", "Will assume"))]


def test_the_worker_writes_its_start_line_as_text_by_default(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    output = started(
        [sys.executable, "-m", "schedule_sdk", "worker"], tmp_path, "stops it", SCHEDULE_DATABASE_URL=db
    )
    lines = output.splitlines()
    assert any(line.startswith("schedule-sdk: worker ") for line in lines), lines
    assert "schedule-sdk: stopping (in-flight fires get 5s)" in lines


@pytest.mark.parametrize(
    "command",
    [["-m", "schedule_sdk", "timer"], ["-m", "schedule_sdk.timer"]],
    ids=["schedule-sdk timer", "python -m schedule_sdk.timer"],
)
def test_both_ways_to_start_the_timer_log_its_ready_and_stop_lines(
    tmp_path: Path, command: list[str]
) -> None:
    env = {"TIMER_DB_PATH": str(tmp_path / "timer.db"), "TIMER_BROKER_URL": "inprocess"}
    output = started([sys.executable, *command], tmp_path, "timer service ready", **env)
    levels = {
        line.split(" INFO ", 1)[1].split(": ", 1)[1].split(" (")[0]
        for line in output.splitlines()
        if " INFO schedule_sdk.entrypoints.timer_service: " in line
    }
    assert {"timer service ready", "stopping the timer service"} <= levels, output
