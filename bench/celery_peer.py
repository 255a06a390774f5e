"""W3 on PostgreSQL + rq beside Celery's ETA tasks, alternating in the same run. Prints figures
and the ratio of the p99s.

Run:  .venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/celery_peer.py [--runs N]
      [--pool prefork|threads|solo] [--concurrency N]

W3 = 6,000 jobs due at 200/s; lateness = when the listener (task) started - its due instant.

- schedule_sdk: ``rq_bench.w3_run``, one ``schedule-sdk worker`` process on PostgreSQL and the
  bench's own durable redis-server (``appendonly yes``, ``appendfsync everysec``).
- Celery 5: a ``celery worker`` process (``bench/celery_app.py``) whose broker is database 1 of
  that same redis-server; 6,000 ``apply_async(eta=...)`` calls, sent after the worker is ready and
  before the first is due. Each task appends its ETA and ``time.time()`` at its start to a file.
  The default pool is prefork with one child per core (2 here): Celery's default, and what a
  production deployment runs (tasks are isolated in child processes; the threads pool is for
  I/O-bound tasks and solo for one task at a time). A Redis broker hands ETA tasks to the worker
  at once; the worker holds them in memory (outside the prefetch limit) until their ETA, and the
  message stays unacknowledged in Redis until then, so the transport's visibility timeout is set
  far beyond the longest ETA of the run (``celery_app.VISIBILITY_TIMEOUT``).

The runs alternate (ours, Celery, ours, ...), so both see the same machine; medians of ``--runs``
runs are printed at the end with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis
from _stats import percentile  # bench/ is on sys.path when run as a script
from rq_bench import W3_JOBS, W3_RATE, Env, cpu_seconds, lateness_line, w3_run

BENCH = Path(__file__).resolve().parent
CELERY_DB = 1  #: the Celery broker's database on the bench's redis-server (ours uses 0)


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` and its children (Linux)."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(c) for c in (task / "children").read_text().split()]
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in children)


class CeleryWorker:
    """A ``celery worker`` process on the broker ``broker``, recording to ``events``."""

    def __init__(self, broker: str, events: Path, pool: str, concurrency: int) -> None:
        ready = events.with_suffix(".ready")
        env = {**os.environ, "PYTHONPATH": str(BENCH)}
        env.update(CELERY_PEER_BROKER=broker, CELERY_PEER_EVENTS=str(events), CELERY_PEER_READY=str(ready))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool", pool,
             "--concurrency", str(concurrency), "--loglevel", "WARNING"],
            cwd=BENCH, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the celery worker failed to start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()  # warm shutdown: the ETA tasks left go back to the broker
        self.process.wait(timeout=60)


def celery_run(env: Env, pool: str, concurrency: int) -> tuple[list[float], float, int]:
    """One W3 run on Celery: lateness (ms) per task, the worker's CPU per task (ms), and how many
    tasks started more than once."""
    from celery_app import app, fire

    broker = env.redis_url.rsplit("/", 1)[0] + f"/{CELERY_DB}"
    redis.Redis.from_url(broker).flushdb()
    app.conf.broker_url = broker
    events = env.dir / f"celery-{time.time_ns()}.events"
    worker = CeleryWorker(broker, events, pool, concurrency)
    idle_cpu = tree_cpu_seconds(worker.process.pid)
    start = datetime.now(UTC) + timedelta(seconds=10)
    etas = [start + timedelta(seconds=i / W3_RATE) for i in range(W3_JOBS)]
    for index, eta in enumerate(etas):
        fire.apply_async(args=(index, eta.timestamp()), eta=eta)
    if datetime.now(UTC) >= start:
        print("  (warning: sending took longer than the lead time)", flush=True)
    deadline = time.monotonic() + (start - datetime.now(UTC)).total_seconds() + W3_JOBS / W3_RATE + 60
    rows: list[list[str]] = []
    while time.monotonic() < deadline:
        rows = [r.split() for r in events.read_text().splitlines()] if events.exists() else []
        if len({r[0] for r in rows}) >= W3_JOBS:
            break
        time.sleep(0.2)
    busy_cpu = tree_cpu_seconds(worker.process.pid) - idle_cpu
    worker.stop()
    first: dict[str, float] = {}
    for index, due, started, _pid in rows:
        first.setdefault(index, (float(started) - float(due)) * 1000)
    doubles = sum(1 for count in Counter(r[0] for r in rows).values() if count > 1)
    return list(first.values()), busy_cpu / max(1, len(rows)) * 1000, doubles


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pool", default="prefork", choices=["prefork", "threads", "solo"])
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    env = Env("postgres")
    p99s: dict[str, list[float]] = {"ours": [], "celery": []}
    p50s: dict[str, list[float]] = {"ours": [], "celery": []}
    try:
        for run in range(1, args.runs + 1):
            late, cpu = w3_run(env)
            print(f"run {run} schedule_sdk rq: {len(late)}/{W3_JOBS} fired, {lateness_line(late)}; "
                  f"worker CPU {cpu:.2f} ms per fire; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            p99s["ours"].append(percentile(late, 99))
            p50s["ours"].append(percentile(late, 50))
            late, cpu, doubles = celery_run(env, args.pool, args.concurrency)
            print(f"run {run} Celery {args.pool} x{args.concurrency}: {len(late)}/{W3_JOBS} started "
                  f"({doubles} more than once), {lateness_line(late)}; worker CPU {cpu:.2f} ms per task; "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            p99s["celery"].append(percentile(late, 99))
            p50s["celery"].append(percentile(late, 50))
            print(f"run {run} p99 ratio schedule_sdk / Celery: {p99s['ours'][-1] / p99s['celery'][-1]:.2f}")
    finally:
        env.close()
    ours, theirs = statistics.median(p99s["ours"]), statistics.median(p99s["celery"])
    print(
        f"W3 medians of {args.runs} runs: schedule_sdk rq p50 {statistics.median(p50s['ours']):.1f} ms, "
        f"p99 {ours:.1f} ms; Celery ETA ({args.pool} x{args.concurrency}) p50 "
        f"{statistics.median(p50s['celery']):.1f} ms, p99 {theirs:.1f} ms; p99 ratio {ours / theirs:.2f}"
    )


if __name__ == "__main__":
    main()
