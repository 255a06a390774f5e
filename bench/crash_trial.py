"""The crash trial: an app that schedules, cancels and fires jobs is killed (SIGKILL) at a random
moment, then restarted; every job whose ``schedule_at`` returned must fire, none early, no
cancelled one after ``cancel`` returned, and each within ``lease + 2`` s of the restart (or of its
due instant, if later). Prints figures.

Run:  .venv/bin/python bench/crash_trial.py [--trials 36] [--store postgres|sqlite]
                                             [--substrate rq|sql] [--lease 5] [--wait 20]

Per trial: a fresh database (and a flushed Redis db of a redis-server of its own), one app process
(bench/crash_app.py) killed 0.5-3 s after it is ready, a quiet app (no new jobs) started at once,
which runs until every acknowledged job fired or ``--wait`` seconds passed. ``lost`` = not fired
by then; ``late`` = fired more than ``lease + 2`` s after max(restart, due).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
from _stats import PG_ADMIN  # bench/ is on sys.path when run as a script

ROOT = Path(__file__).resolve().parents[1]
PG_TRIAL = "postgresql+psycopg://postgres@127.0.0.1:5432/schedule_sdk_crash_trial"


def fresh_database(store: str, directory: Path, trial: int) -> str:
    if store == "sqlite":
        return f"sqlite:///{directory / f'trial{trial}.db'}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS schedule_sdk_crash_trial WITH (FORCE)")
        conn.execute("CREATE DATABASE schedule_sdk_crash_trial")
    return PG_TRIAL


def app(env: dict[str, str], **extra: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "bench/crash_app.py"], cwd=ROOT, env={**env, **extra},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def read(log: Path) -> tuple[dict[str, float], dict[str, float], dict[str, list[float]]]:
    scheduled: dict[str, float] = {}
    cancelled: dict[str, float] = {}
    fires: dict[str, list[float]] = {}
    for line in log.read_text().splitlines() if log.exists() else []:
        kind, job_id, at = line.split()
        if kind == "S":
            scheduled[job_id] = float(at)
        elif kind == "C":
            cancelled[job_id] = float(at)
        else:
            fires.setdefault(job_id, []).append(float(at))
    return scheduled, cancelled, fires


def trial(args: argparse.Namespace, env: dict[str, str], log: Path) -> dict[str, int]:
    victim = app(env)
    time.sleep(random.uniform(0.5, 3.0))
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    restart = time.time()
    survivor = app(env, CRASH_QUIET="1")
    bound = args.lease + 2.0
    try:
        deadline = restart + args.wait
        while time.time() < deadline:
            scheduled, cancelled, fires = read(log)
            if all(j in fires for j in scheduled if j not in cancelled):
                break
            time.sleep(0.2)
    finally:
        survivor.terminate()
        survivor.wait(timeout=30)
    scheduled, cancelled, fires = read(log)
    wanted = [j for j in scheduled if j not in cancelled]
    return {
        "jobs": len(scheduled),
        "lost": sum(j not in fires for j in wanted),
        "late": sum(j in fires and min(fires[j]) > max(restart, scheduled[j]) + bound for j in wanted),
        "early": sum(f < scheduled[j] - 0.001 for j in scheduled for f in fires.get(j, [])),
        "cancelled_fired": sum(any(f > at for f in fires.get(j, [])) for j, at in cancelled.items()),
        "duplicates": sum(len(fires.get(j, [])) > 1 for j in scheduled),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=36)
    parser.add_argument("--store", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--substrate", choices=["rq", "sql"], default="rq")
    parser.add_argument("--lease", type=float, default=5.0)
    parser.add_argument("--wait", type=float, default=20.0)
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="sdk-crash-trial-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(0.5)
    totals: dict[str, int] = {}
    stuck = 0
    try:
        for n in range(args.trials):
            import redis

            redis.Redis(port=port).flushdb()
            log = directory / f"trial{n}.log"
            env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
            env.update(
                SCHEDULE_DATABASE_URL=fresh_database(args.store, directory, n),
                SCHEDULE_SUBSTRATE=args.substrate,
                SCHEDULE_REDIS_URL=f"redis://127.0.0.1:{port}/0",
                SCHEDULE_LEASE_SECONDS=str(args.lease),
                CRASH_LOG=str(log),
                PYTHONPATH=str(ROOT),
            )
            result = trial(args, env, log)
            stuck += bool(result["lost"] or result["late"])
            for key, value in result.items():
                totals[key] = totals.get(key, 0) + value
            print(f"trial {n + 1:3d}: {result}", flush=True)
    finally:
        server.terminate()
        server.wait()
    print(f"{args.substrate} on {args.store}, lease {args.lease:g} s, {args.trials} trials: {totals}; "
          f"trials with a lost or late job: {stuck}")  # fmt: skip


if __name__ == "__main__":
    main()
