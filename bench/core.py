"""Benchmarks of the core on the embedded ``sql`` substrate. Prints figures.

Run:  .venv/bin/python bench/core.py [--store sqlite|postgres|pgbouncer|all|a,b] [--only W1,W2,W3,W4]
      [--runs N]

``--store postgres,pgbouncer --runs 5`` alternates the two stores run by run and ends with the
median of each figure of W2 and W3 per store.

W1  schedule_at: 20,000 one-shots due in an hour, one caller  -> jobs/s
W1A W1 through AsyncScheduleService (awaited one after another on one loop)
W1M schedule_many: the same 20,000 in one call, and in calls of 1,000 -> jobs/s
W2  10,000 jobs due at the same instant, worker running        -> drain fires/s, lateness p50/p99
W3  6,000 jobs due at 200/s                                    -> lateness p50/p99/max, early count
W2T, W3T  W2 and W3 with a time limit on every fire (default_time_limit 60 s, never reached):
    what running each fire's listeners on a helper thread of its own costs
W3K W3 with every job under one concurrency key of limit 8, alternating in one run with plain W3
    (three pairs)                                               -> both lateness figures, p99 medians
W4  resident memory of a worker with 100,000 pending jobs      -> RSS MB at 0 / 10k / 100k pending
M1  1,000,000 pending jobs (due in a day; 1,000 owners) loaded with schedule_many, then a worker
    running: its RSS over 20 s, a filtered ``list`` page (owner + status), and W3 on top.
    ``--pending 10000000 --store postgres``: ten million; past one million, PostgreSQL copies a
    row written by schedule_many server-side (INSERT ... SELECT over generate_series, new id and
    owner per row), a million rows a statement
                                                                -> load jobs/s, RSS MB, page ms, W3
R1  W3 while 1,000,000 finished rows are purged (the worker's retention tick and a concurrent
    ``jobs purge``-style run to the end)                         -> W3 lateness, purge rows/s

Lateness = listener start (fired_at) - due instant (scheduled_for). PostgreSQL uses a fresh
database ``schedule_sdk_bench`` on 127.0.0.1:5432 (dropped and re-created per workload);
``pgbouncer`` is the same database through PgBouncer in transaction pooling on 127.0.0.1:6432
(``database_pooler=transaction``, LISTEN on the direct URL: the production how-to's setting).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from _stats import PG_ADMIN, percentile  # bench/ is on sys.path when run as a script

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    ConcurrencyLimit,
    JobMetadata,
    ListenerRegistry,
    OneShotSpec,
    ScheduleArrivedEvent,
    ScheduleContainer,
)

#: Another worktree's bench may use the default name at the same time: set SCHEDULE_BENCH_DB.
BENCH_DB = os.environ.get("SCHEDULE_BENCH_DB", "schedule_sdk_bench")
PG_BENCH = f"postgresql+psycopg://postgres@127.0.0.1:5432/{BENCH_DB}"
PGBOUNCER_BENCH = f"postgresql+psycopg://postgres@127.0.0.1:6432/{BENCH_DB}"
STORES = ["sqlite", "postgres", "pgbouncer"]
#: The settings of a store beyond its URL.
STORE_SETTINGS: dict[str, dict[str, object]] = {
    "pgbouncer": {"database_pooler": "transaction", "database_listen_url": PG_BENCH},
}
#: The figures of W2 and W3 per (workload, store), for the medians printed at the end.
FIGURES: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)


def fresh_url(store: str) -> str:
    if store == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(prefix='sdk-bench-')}/bench.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    return PGBOUNCER_BENCH if store == "pgbouncer" else PG_BENCH


class Bench:
    """A container with a recording listener."""

    def __init__(self, store: str, **settings: object) -> None:
        self.container = ScheduleContainer()
        self.container.config.from_dict(
            {"database_url": fresh_url(store), **STORE_SETTINGS.get(store, {}), **settings}
        )
        self.registry: ListenerRegistry = self.container.listeners()
        self.lateness: list[float] = []
        self.done = threading.Event()
        self.expected = 0
        self._lock = threading.Lock()
        self.registry.connect(SCHEDULE_ARRIVED_EVENT, self._on_event)
        self.service = self.container.schedule_service()

    def _on_event(self, event: ScheduleArrivedEvent) -> None:
        late = (event.fired_at - event.scheduled_for).total_seconds() * 1000
        with self._lock:
            self.lateness.append(late)
            if len(self.lateness) >= self.expected:
                self.done.set()

    def close(self) -> None:
        self.container.worker().stop()
        self.container.shutdown_resources()


def spec(run_at: datetime, concurrency: ConcurrencyLimit | None = None) -> OneShotSpec:
    return OneShotSpec(
        topic="bench.job", run_at=run_at, timezone="UTC", payload={"n": 1}, concurrency=concurrency
    )


def load(bench: Bench, run_ats: list[datetime], concurrency: ConcurrencyLimit | None = None) -> None:
    """The jobs of W2 and W3, written before the worker starts (schedule_many, 1,000 a call)."""
    for start in range(0, len(run_ats), 1_000):
        chunk = run_ats[start : start + 1_000]
        bench.service.schedule_many([spec(run_at, concurrency) for run_at in chunk])


def w1(store: str) -> str:
    bench = Bench(store)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    bench.service.schedule_at(spec(run_at))  # warm up (schema, pool)
    n = 20_000
    started = time.perf_counter()
    for _ in range(n):
        bench.service.schedule_at(spec(run_at))
    elapsed = time.perf_counter() - started
    bench.close()
    return f"W1 {store:8} schedule_at: {n / elapsed:,.0f} jobs/s ({n} in {elapsed:.2f} s)"


def w1a(store: str) -> str:
    bench = Bench(store)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    n = 20_000

    async def run() -> float:
        service = bench.container.async_schedule_service()
        await service.schedule_at(spec(run_at))  # warm up (schema, pool)
        started = time.perf_counter()
        for _ in range(n):
            await service.schedule_at(spec(run_at))
        elapsed = time.perf_counter() - started
        await bench.container.async_engine().dispose()
        return elapsed

    elapsed = asyncio.run(run())
    bench.close()
    return f"W1A {store:8} async schedule_at: {n / elapsed:,.0f} jobs/s ({n} in {elapsed:.2f} s)"


def w1m(store: str) -> str:
    bench = Bench(store)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    bench.service.schedule_many([spec(run_at)])  # warm up (schema, pool)
    n, figures = 20_000, []
    for batch in (n, 1_000):
        specs = [spec(run_at) for _ in range(n)]  # built by the caller, outside the timing
        started = time.perf_counter()
        for start in range(0, n, batch):
            bench.service.schedule_many(specs[start : start + batch])
        elapsed = time.perf_counter() - started
        figures.append(f"{n // batch} call(s) of {batch:,}: {n / elapsed:,.0f} jobs/s")
    bench.close()
    return f"W1M {store:8} schedule_many x{n}: " + "; ".join(figures)


def w2(store: str, label: str = "W2", **settings: object) -> str:
    bench = Bench(store, worker_concurrency=8, **settings)
    n = 10_000
    bench.expected = n
    due = datetime.now(UTC) + timedelta(seconds=10)
    load(bench, [due] * n)
    bench.container.worker().start()
    wait = (due - datetime.now(UTC)).total_seconds()
    time.sleep(max(0.0, wait))
    bench.done.wait(300)
    drain = max(bench.lateness) / 1000
    late = bench.lateness
    bench.close()
    FIGURES["W2", store].append(
        {"fires/s": n / drain, "p50 ms": percentile(late, 50), "p99 ms": percentile(late, 99)}
    )
    return (
        f"{label} {store:8} burst of {n}: drained in {drain:.2f} s = {n / drain:,.0f} fires/s; "
        f"lateness p50 {percentile(late, 50):.0f} ms, p99 {percentile(late, 99):.0f} ms"
    )


def w3(store: str, label: str = "W3", **settings: object) -> str:
    bench = Bench(store, **settings)
    late = _run_w3(bench, store)
    FIGURES["W3", store].append(
        {"p50 ms": percentile(late, 50), "p99 ms": percentile(late, 99), "max ms": max(late)}
    )
    return f"{label} {store:8} " + _w3_figures(late)


def w3k(store: str) -> str:
    """W3 and W3 under one key of limit 8, alternating (plain first), three pairs."""
    lines, p99 = [], {"plain": [], "keyed": []}
    for _ in range(3):
        for kind in ("plain", "keyed"):
            limit = ConcurrencyLimit(key="bench", limit=8) if kind == "keyed" else None
            late = _run_w3(Bench(store), store, concurrency=limit)
            p99[kind].append(percentile(late, 99))
            lines.append(f"W3K {store:8} {kind:5} " + _w3_figures(late))
    plain, keyed = (percentile(p99[kind], 50) for kind in ("plain", "keyed"))
    ratio = keyed / plain
    lines.append(f"W3K {store:8} median p99: plain {plain:.2f} ms, keyed {keyed:.2f} ms ({ratio:.2f}x)")
    return "\n".join(lines)


def _run_w3(
    bench: Bench,
    store: str,
    *,
    when_due: Callable[[], None] | None = None,
    concurrency: ConcurrencyLimit | None = None,
) -> list[float]:
    n, rate = 6_000, 200
    bench.expected = n
    start = datetime.now(UTC) + timedelta(seconds=10)
    load(bench, [start + timedelta(seconds=i / rate) for i in range(n)], concurrency)
    bench.container.worker().start()
    if when_due is not None:
        time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds() - 1.0))
        when_due()
    bench.done.wait((start - datetime.now(UTC)).total_seconds() + n / rate + 60)
    late = list(bench.lateness)
    bench.close()
    return late


def _w3_figures(late: list[float]) -> str:
    early = sum(1 for v in late if v < 0)
    return (
        f"{len(late)} due at 200/s: lateness p50 {percentile(late, 50):.2f} ms, "
        f"p99 {percentile(late, 99):.2f} ms, max {max(late):.2f} ms, early {early}"
    )


FINISHED_ROWS = 1_000_000
_FILL = {
    "sqlite": """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows)
INSERT INTO schedule_jobs (id, topic, status, run_at, scheduled_for, timezone, retry, occurrence,
    attempt, occurrence_count, created_at, updated_at)
SELECT printf('00000000-0000-7000-8000-%012d', i), 'bench.old', 'completed',
    '2020-01-01T00:00:00.000000Z', '2020-01-01T00:00:00.000000Z', 'UTC',
    :retry, 1, 1, 1,
    '2020-01-01T00:00:00.000000Z', '2020-01-02T00:00:00.000000Z' FROM n""",
    "postgres": """
INSERT INTO schedule_jobs (id, topic, status, run_at, scheduled_for, timezone, retry, occurrence,
    attempt, occurrence_count, created_at, updated_at)
SELECT '00000000-0000-7000-8000-' || lpad(i::text, 12, '0'), 'bench.old', 'completed',
    '2020-01-01Z', '2020-01-01Z', 'UTC', :retry, 1, 1, 1, '2020-01-01Z',
    '2020-01-02Z'::timestamptz + i * interval '1 microsecond'
FROM generate_series(1, :rows) AS i""",
}


def r1(store: str) -> str:
    """W3 while retention purges a million finished rows (one purger at a time)."""
    import sqlalchemy as sa

    bench = Bench(store, retention="30d")
    with bench.container.engine().begin() as conn:
        retry = '{"attempts":1,"backoff":{"type":"fixed","delay_ms":1000}}'
        conn.execute(sa.text(_FILL[store]), {"rows": FINISHED_ROWS, "retry": retry})
    purger = bench.container.purger()
    purged: list[int] = []
    purger.on_purged = purged.append
    window: list[float] = []

    def purge_to_the_end() -> None:
        started = time.perf_counter()
        purger.purge(timedelta(days=30))
        window.append(time.perf_counter() - started)

    thread = threading.Thread(target=purge_to_the_end, daemon=True)
    late = _run_w3(bench, store, when_due=thread.start)
    thread.join()
    total, seconds = sum(purged), window[0]
    return (
        f"R1 {store:8} W3 {_w3_figures(late)}; meanwhile purged {total:,} of {FINISHED_ROWS:,} "
        f"finished rows in {seconds:.1f} s ({total / seconds:,.0f} rows/s)"
    )


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def w4(store: str) -> str:
    bench = Bench(store)
    bench.container.worker().start()
    readings = [f"0: {rss_mb():.0f} MB"]
    run_at = datetime.now(UTC) + timedelta(hours=1)
    total = 0
    for target in (10_000, 100_000):
        while total < target:
            bench.service.schedule_at(spec(run_at))
            total += 1
        time.sleep(2)  # let the poller cycle with this many pending
        readings.append(f"{target:,}: {rss_mb():.0f} MB")
    bench.close()
    return f"W4 {store:8} worker process RSS with N pending: " + ", ".join(readings)


def worker_process_rss(database_url: str, seconds: float) -> list[float]:
    """Start a ``schedule-sdk worker`` process on ``database_url``; its RSS (MB) every 5 s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULE_")}
    env["SCHEDULE_DATABASE_URL"] = database_url
    worker = subprocess.Popen(
        [sys.executable, "-m", "schedule_sdk", "worker"], env=env, stderr=subprocess.PIPE, text=True
    )
    assert worker.stderr is not None
    while "started" not in (line := worker.stderr.readline()):
        if not line:
            raise RuntimeError("worker failed to start")
    readings = []
    for _ in range(int(seconds / 5) + 1):
        status = Path(f"/proc/{worker.pid}/status").read_text()
        readings.append(int(status.split("VmRSS:")[1].split()[0]) / 1024)
        time.sleep(5)
    worker.terminate()
    worker.wait(30)
    return readings


PENDING_ROWS = 1_000_000

#: Copies the template row (one pending job written by schedule_many) :n times, with a new id and
#: owner per copy; the row's other columns (due time, policies, timestamps) stay those of a real job.
_COPY_PENDING = """
INSERT INTO schedule_jobs (id, topic, status, run_at, scheduled_for, timezone, payload, owner_id,
    tenant_id, correlation_id, client_request_id, repeat, retry, occurrence, attempt,
    occurrence_count, repeat_limit, ends_at, last_fired_at, last_error, claimed_by, claimed_until,
    created_at, updated_at, rescheduled_from, rescheduled_to, misfire, regular_due, trace_context)
SELECT
    '00000000-0000-7000-9000-' || lpad(k::text, 12, '0'), topic, status, run_at, scheduled_for,
    timezone, payload, 'owner-' || (k % 1000), tenant_id, correlation_id, NULL, repeat, retry,
    occurrence, attempt, occurrence_count, repeat_limit, ends_at, last_fired_at, last_error,
    claimed_by, claimed_until, created_at, updated_at, rescheduled_from, rescheduled_to, misfire,
    regular_due, trace_context
FROM schedule_jobs,
    (SELECT CAST(:first AS integer) + g AS k FROM generate_series(0, CAST(:n AS integer) - 1) AS g) AS s
WHERE id = :template"""


def _copy_pending(bench: Bench, rows: int) -> None:
    import sqlalchemy as sa

    template = bench.service.list(owner_id="owner-0", status="pending", limit=1).items[0].id
    for first in range(0, rows, 1_000_000):
        with bench.container.engine().begin() as conn:
            n = min(1_000_000, rows - first)
            conn.execute(sa.text(_COPY_PENDING), {"first": first, "n": n, "template": template})


def m1(store: str) -> str:
    """A million pending jobs: bulk load, worker memory, a filtered list page, W3 on top."""
    import statistics

    bench = Bench(store)
    later = datetime.now(UTC) + timedelta(days=1)
    started = time.perf_counter()
    for start in range(0, min(PENDING_ROWS, 1_000_000), 20_000):
        bench.service.schedule_many(
            [
                OneShotSpec(
                    topic="bench.backlog",
                    run_at=later,
                    timezone="UTC",
                    metadata=JobMetadata(owner_id=f"owner-{i % 1000}"),
                )
                for i in range(start, start + 20_000)
            ]
        )
    if PENDING_ROWS > 1_000_000:
        if store != "postgres":
            raise SystemExit("M1 beyond a million pending rows is a PostgreSQL workload")
        _copy_pending(bench, PENDING_ROWS - 1_000_000)
    load = PENDING_ROWS / (time.perf_counter() - started)
    if store == "postgres":
        with bench.container.engine().begin() as conn:
            conn.exec_driver_sql("ANALYZE schedule_jobs")
    pages = []
    for i in range(50):
        t0 = time.perf_counter()
        page = bench.service.list(owner_id=f"owner-{i}", status="pending", limit=50)
        bench.service.list(owner_id=f"owner-{i}", status="pending", limit=50, cursor=page.next_cursor)
        pages.append((time.perf_counter() - t0) * 1000 / 2)
    rss = worker_process_rss(bench.container.config.database_url(), seconds=20)
    late = _run_w3(bench, store)
    return (
        f"M1 {store:8} {PENDING_ROWS:,} pending loaded at {load:,.0f} jobs/s; list page (owner+status) "
        f"median {statistics.median(pages):.2f} ms, max {max(pages):.2f} ms; a `schedule-sdk worker` "
        f"process's RSS every 5 s: {', '.join(f'{r:.0f}' for r in rss)} MB; W3 on top: {_w3_figures(late)}"
    )


WORKLOADS: dict[str, Callable[[str], str]] = {
    "W1": w1,
    "W1A": w1a,
    "W1M": w1m,
    "W2": w2,
    "W3": w3,
    "W2T": lambda store: w2(store, "W2T", default_time_limit="60"),
    "W3T": lambda store: w3(store, "W3T", default_time_limit="60"),
    "W3K": w3k,
    "W4": w4,
    "M1": m1,
    "R1": r1,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", default="all", help=f"all, or one or more of {', '.join(STORES)}")
    parser.add_argument("--only", default="W1,W2,W3,W4")
    parser.add_argument(
        "--runs", type=int, default=1, help="repeat each workload; medians are the reader's job"
    )
    parser.add_argument("--pending", type=int, default=PENDING_ROWS, help="M1: pending rows")
    args = parser.parse_args()
    globals()["PENDING_ROWS"] = args.pending
    stores = STORES if args.store == "all" else args.store.split(",")
    unknown = set(stores) - set(STORES)
    if unknown:
        parser.error(f"unknown store(s): {', '.join(sorted(unknown))}")
    for name in args.only.split(","):
        for _ in range(args.runs):
            for store in stores:  # alternate the stores run by run
                print(WORKLOADS[name.strip()](store), flush=True)
    for (name, store), runs in FIGURES.items():
        medians = ", ".join(f"{key} {statistics.median(r[key] for r in runs):,.2f}" for key in runs[0])
        print(f"{name} {store:9} median of {len(runs)} run(s): {medians}", flush=True)


if __name__ == "__main__":
    main()
