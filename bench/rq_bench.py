"""Benchmarks of the ``rq`` substrate, PostgreSQL + Redis, both durable. Prints figures.

Run:  .venv/bin/python bench/rq_bench.py [--only W1,W2,W3,R] [--store postgres|sqlite]

It starts its own redis-server on a free port with ``appendonly yes, appendfsync everysec`` (the
shared test server has persistence off) and a fresh PostgreSQL database ``schedule_sdk_rq_bench``
(``$SCHEDULE_RQ_BENCH_DB`` names another)
(fsync and synchronous_commit on, as configured on the machine).

W1  schedule_at: 10,000 one-shots due in an hour, 1 and 8 callers       -> jobs/s
W1M schedule_many: 20,000 one-shots (half due in a minute, half in an hour) in one call,
    and in calls of 1,000                                                 -> jobs/s
W2  10,000 jobs due at one instant, two ``schedule-sdk worker`` processes -> drain fires/s, lateness
W3  6,000 jobs due at 200/s, one ``schedule-sdk worker`` process          -> lateness p50/p99/max, early
W2P W2 with 1, 2 and 4 ``schedule-sdk worker`` processes, on each substrate (sql: PostgreSQL
    alone; rq: PostgreSQL + Redis)                                         -> drain fires/s, lateness
R   100,000 (--pending) pending rows with no Redis entry, one reconciler run         -> seconds, healed

Lateness = listener start (fired_at) - due instant (scheduled_for), measured in the worker.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from _stats import PG_ADMIN, percentile  # bench/ is on sys.path when run as a script

from schedule_sdk import OneShotSpec, ScheduleContainer
from schedule_sdk.core.reconciler import Reconciler

ROOT = Path(__file__).resolve().parents[1]
#: Another worktree's bench may use the default name at the same time: set SCHEDULE_RQ_BENCH_DB.
BENCH_DB = os.environ.get("SCHEDULE_RQ_BENCH_DB", "schedule_sdk_rq_bench")
PG_BENCH = f"postgresql+psycopg://postgres@127.0.0.1:5432/{BENCH_DB}"


class Env:
    """A durable redis-server of our own, a fresh database, and worker processes."""

    def __init__(self, store: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="sdk-rq-bench-"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
             "--appendfsync", "everysec", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        time.sleep(0.5)
        self.store = store
        self.workers: list[subprocess.Popen[str]] = []

    def settings(self) -> dict[str, object]:
        if self.store == "sqlite":
            url = f"sqlite:///{self.dir / f'bench-{time.time_ns()}.db'}"
        else:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {BENCH_DB}")
            url = PG_BENCH
        import redis

        redis.Redis.from_url(self.redis_url).flushdb()
        return {"database_url": url, "redis_url": self.redis_url, "rq_queue": "bench"}

    def container(self, settings: dict[str, object]) -> ScheduleContainer:
        container = ScheduleContainer()
        container.config.from_dict(settings)
        return container

    def start_workers(self, settings: dict[str, object], count: int, events: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
        env.update({f"SCHEDULE_{k.upper()}": str(v) for k, v in settings.items()})
        env.update(SCHEDULE_LISTENER_MODULES="bench.rq_listener", RQ_BENCH_EVENTS=str(events))
        env["PYTHONPATH"] = str(ROOT)
        for _ in range(count):
            worker = subprocess.Popen(
                [sys.executable, "-m", "schedule_sdk", "worker"], cwd=ROOT, env=env,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert worker.stderr is not None
            while "started" not in (line := worker.stderr.readline()):
                if not line:
                    raise RuntimeError("worker failed to start")
            self.workers.append(worker)

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.wait(timeout=30)
        self.workers.clear()

    def close(self) -> None:
        self.stop_workers()
        self.redis.terminate()
        self.redis.wait()


def spec(run_at: datetime) -> OneShotSpec:
    return OneShotSpec(topic="bench", run_at=run_at, timezone="UTC")


def bulk_insert(container: ScheduleContainer, run_ats: list[datetime]) -> None:
    """Rows only (no queue entries), in large transactions: the setup for W2 and R."""
    service, store = container.schedule_service(), container.store()
    for start in range(0, len(run_ats), 5000):
        with store.transaction() as tx:
            tx.insert_many([service._new_job(spec(run_at)) for run_at in run_ats[start : start + 5000]])


def wait_events(events: Path, count: int, timeout: float) -> list[tuple[float, float]]:
    deadline = time.monotonic() + timeout
    rows: list[str] = []
    while time.monotonic() < deadline:
        rows = events.read_text().splitlines() if events.exists() else []
        if len(rows) >= count:
            break
        time.sleep(0.2)
    return [(float(a), float(b)) for a, b in (r.split() for r in rows)]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def w1(env: Env) -> None:
    container = env.container(env.settings())
    service = container.schedule_service()
    due = datetime.now(UTC) + timedelta(hours=1)
    for _ in range(200):
        service.schedule_at(spec(due))  # warm-up
    n = 10_000

    def call(count: int) -> None:
        for _ in range(count):
            service.schedule_at(spec(due))

    for callers in (1, 8):
        threads = [threading.Thread(target=call, args=(n // callers,)) for _ in range(callers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        print(f"W1 [{env.store}+redis] schedule_at x{n}, {callers} caller(s): {n / elapsed:,.0f} jobs/s")
    container.shutdown_resources()


def w1m(env: Env) -> None:
    container = env.container(env.settings())
    service = container.schedule_service()
    n, now = 20_000, datetime.now(UTC)
    service.schedule_many([spec(now + timedelta(hours=1))])  # warm-up
    for batch in (n, 1_000):
        # half near (staged, then activated after the commit), half far (straight to the delay index)
        specs = [spec(now + timedelta(minutes=1 if i % 2 else 60)) for i in range(n)]
        started = time.perf_counter()
        for start in range(0, n, batch):
            service.schedule_many(specs[start : start + batch])
        elapsed = time.perf_counter() - started
        print(f"W1M [{env.store}+redis] schedule_many x{n} in calls of {batch:,}: {n / elapsed:,.0f} jobs/s")
    container.shutdown_resources()


def w2(env: Env) -> None:
    settings = env.settings()
    container = env.container(settings)
    n, events = 10_000, env.dir / f"w2-{time.time_ns()}.events"
    due = datetime.now(UTC) + timedelta(seconds=30)
    bulk_insert(container, [due] * n)
    Reconciler(store=container.store(), queue=container.queue(), clock=container.clock()).run()
    env.start_workers(settings, 2, events)
    rows = wait_events(events, n, timeout=max(60.0, (due - datetime.now(UTC)).total_seconds() + 60))
    env.stop_workers()
    late = [(f - s) * 1000 for s, f in rows]
    drain = max(f for _, f in rows) - due.timestamp()
    print(
        f"W2 [{env.store}+redis] {len(rows)}/{n} due at one instant, 2 worker processes: "
        f"drained in {drain:.2f}s = {len(rows) / drain:,.0f} fires/s; "
        f"lateness p50 {percentile(late, 50):.0f} ms, p99 {percentile(late, 99):.0f} ms, "
        f"early {sum(1 for x in late if x < 0)}"
    )
    container.shutdown_resources()


SUBSTRATES = ("sql", "rq")


def w2_processes(env: Env) -> None:
    for substrate in SUBSTRATES:
        for count in (1, 2, 4):
            settings = {**env.settings(), "substrate": substrate}
            container = env.container(settings)
            n, events = 10_000, env.dir / f"w2p-{time.time_ns()}.events"
            due = datetime.now(UTC) + timedelta(seconds=20)
            container.schedule_service().schedule_many([spec(due) for _ in range(n)])
            env.start_workers(settings, count, events)
            rows = wait_events(events, n, timeout=max(60.0, (due - datetime.now(UTC)).total_seconds() + 120))
            env.stop_workers()
            late = [(f - s) * 1000 for s, f in rows]
            drain = max(f for _, f in rows) - due.timestamp()
            early = sum(1 for x in late if x < 0)
            print(
                f"W2P [{env.store}, {substrate}] {len(rows)}/{n} due at one instant, {count} worker "
                f"process(es): drained in {drain:.2f}s = {len(rows) / drain:,.0f} fires/s; lateness "
                f"p50 {percentile(late, 50):.0f} ms, p99 {percentile(late, 99):.0f} ms, early {early}",
                flush=True,
            )
            container.shutdown_resources()


W3_JOBS, W3_RATE = 6_000, 200


def w3_run(env: Env) -> tuple[list[float], float]:
    """One W3 run: the lateness of each fire (ms) and the worker's CPU per fire (ms)."""
    settings = env.settings()
    container = env.container(settings)
    n, rate, events = W3_JOBS, W3_RATE, env.dir / f"w3-{time.time_ns()}.events"
    start = datetime.now(UTC) + timedelta(seconds=25)
    bulk_insert(container, [start + timedelta(seconds=i / rate) for i in range(n)])
    Reconciler(store=container.store(), queue=container.queue(), clock=container.clock()).run()
    env.start_workers(settings, 1, events)
    idle_cpu = cpu_seconds(env.workers[0].pid)
    rows = wait_events(events, n, timeout=(start - datetime.now(UTC)).total_seconds() + n / rate + 60)
    busy_cpu = cpu_seconds(env.workers[0].pid) - idle_cpu
    env.stop_workers()
    container.shutdown_resources()
    return [(f - s) * 1000 for s, f in rows], busy_cpu / max(1, len(rows)) * 1000


def lateness_line(late: list[float]) -> str:
    """``p50 / p99 / max / early`` of lateness figures in ms."""
    return (
        f"lateness p50 {percentile(late, 50):.1f} ms, p99 {percentile(late, 99):.1f} ms, "
        f"max {max(late):.1f} ms, early {sum(1 for x in late if x < 0)}"
    )


def w3(env: Env) -> None:
    late, cpu = w3_run(env)
    print(
        f"W3 [{env.store}+redis] {len(late)}/{W3_JOBS} due at {W3_RATE}/s, 1 worker process: "
        f"{lateness_line(late)}; worker CPU {cpu:.2f} ms per fire",
        flush=True,
    )


PENDING = 100_000


def reconcile(env: Env) -> None:
    container = env.container(env.settings())
    n = PENDING
    due = datetime.now(UTC) + timedelta(hours=1)
    bulk_insert(container, [due] * n)
    reconciler = Reconciler(store=container.store(), queue=container.queue(), clock=container.clock())
    started = time.perf_counter()
    report = reconciler.run()
    elapsed = time.perf_counter() - started
    print(f"R  [{env.store}+redis] healed {report.healed:,} of {report.scanned:,} in {elapsed:.1f}s")
    container.shutdown_resources()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="W1,W2,W3,R")
    parser.add_argument("--store", default="postgres", choices=["postgres", "sqlite"])
    parser.add_argument("--pending", type=int, default=PENDING, help="rows without an entry for R")
    parser.add_argument("--substrates", default=",".join(SUBSTRATES), help="W2P: sql,rq")
    args = parser.parse_args()
    globals()["PENDING"] = args.pending
    globals()["SUBSTRATES"] = tuple(args.substrates.split(","))
    env = Env(args.store)
    try:
        workloads = {"W1": w1, "W1M": w1m, "W2": w2, "W2P": w2_processes, "W3": w3, "R": reconcile}
        for name in args.only.split(","):
            workloads[name.strip()](env)
    finally:
        env.close()


if __name__ == "__main__":
    main()
