"""The dashboard with one million jobs: every page's time to answer (median of several requests,
in-process through the ASGI app, so this is server time: queries plus rendering). Prints figures.

Run:  .venv/bin/python bench/dashboard.py [--store sqlite|postgres|all] [--jobs N] [--fires N] [--repeat N]

Data (bulk-loaded with executemany, then ANALYZE): N jobs over 20 topics, 100 tenants and 1,000
owners (70% completed, 18% pending, 6% cancelled, 4% failed, 2% paused, none active; 1% cron
jobs), one million fire history entries over the last 24 hours (written through
the SQL transaction's ``record_fires``, 20,000 a transaction, by 16 threads on their own connections,
so the per-minute summary is kept as workers keep it, on PostgreSQL in up to 16 shards), and
10,000 timers of 20 tenants. PostgreSQL uses a fresh database on
127.0.0.1:5432, ``schedule_sdk_bench_dashboard`` unless ``SCHEDULE_DASHBOARD_BENCH_DB`` names
another (another worktree's bench may use the default at the same time).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa
from _stats import PG_ADMIN  # bench/ is on sys.path when run as a script

from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.adapters.sql.tables import schedule_jobs
from schedule_sdk.adapters.sql.timers import timer_schedules
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.dashboard import create_dashboard
from schedule_sdk.domain.history import FireOutcome, FireRecord
from schedule_sdk.domain.ids import new_id
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import FakeClock

BENCH_DB = os.environ.get("SCHEDULE_DASHBOARD_BENCH_DB", "schedule_sdk_bench_dashboard")
PG_BENCH = f"postgresql+psycopg://postgres@127.0.0.1:5432/{BENCH_DB}"
STATUSES = ["completed"] * 70 + ["pending"] * 18 + ["cancelled"] * 6 + ["failed"] * 4 + ["paused"] * 2
CHUNK = 20_000


def fresh_url(store: str) -> str:
    if store == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(prefix='sdk-dash-bench-')}/bench.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    return PG_BENCH


def job_rows(n: int, now: datetime, rng: random.Random):
    retry = json.dumps({"attempts": 3, "backoff": {"type": "fixed", "delay_ms": 1000}})
    cron = json.dumps({"type": "cron", "expression": "30 2 * * *", "timezone": "Europe/Berlin"})
    for i in range(n):
        status = rng.choice(STATUSES)
        repeating = i % 100 == 0 and status in ("pending", "paused")
        due = now + timedelta(seconds=rng.randint(-86_400, 86_400))
        yield {
            "id": new_id(),
            "topic": f"topic.{i % 20}",
            "status": status,
            "run_at": due,
            "scheduled_for": due,
            "timezone": "Europe/Berlin" if repeating else "UTC",
            "payload": json.dumps({"n": i, "note": "bench"}),
            "owner_id": f"owner-{rng.randrange(1000)}",
            "tenant_id": f"tenant-{rng.randrange(100)}",
            "correlation_id": None,
            "client_request_id": None,
            "repeat": cron if repeating else None,
            "retry": retry,
            "occurrence": 1,
            "attempt": 1,
            "occurrence_count": 0,
            "repeat_limit": None,
            "ends_at": None,
            "last_fired_at": None,
            "last_error": "RuntimeError: boom" if status == "failed" else None,
            "claimed_by": None,
            "claimed_until": None,
            "created_at": now - timedelta(days=2),
            "updated_at": now - timedelta(days=1),
            "rescheduled_from": None,
            "rescheduled_to": None,
            "misfire": None,
            "regular_due": None,
        }


def fire_records(n: int, now: datetime, rng: random.Random, job_ids: list[str]):
    """``n`` fires over the last 24 hours, oldest first, as the fire path writes them."""
    offsets = sorted((rng.random() * 86_400 for _ in range(n)), reverse=True)
    for i, offset in enumerate(offsets):
        fired = now - timedelta(seconds=offset)
        late = int(rng.expovariate(1 / 15))
        failed = rng.random() < 0.03
        yield FireRecord(
            job_id=rng.choice(job_ids),
            topic=f"topic.{i % 20}",
            occurrence=1,
            attempt=1,
            due_at=fired - timedelta(milliseconds=late),
            fired_at=fired,
            lateness_ms=late,
            duration_ms=int(rng.expovariate(1 / 20)),
            outcome=FireOutcome.FAILED if failed else FireOutcome.SUCCEEDED,
            error="RuntimeError: boom" if failed else None,
            worker_id=f"worker-{i % 4}",
        )


def record(store: SQLAlchemyJobStore, fires: Iterator[FireRecord], writers: int) -> None:
    """Write ``fires`` with ``record_fires``, ``CHUNK`` a transaction, from ``writers`` threads at
    once (each on its own connection: on PostgreSQL the counts of a minute are spread over as
    many summary shards, up to 16, which the overview then sums)."""
    started = time.perf_counter()
    lock = threading.Lock()
    counts: list[int] = []

    def write() -> None:
        count = 0
        while True:
            with lock:
                batch = list(itertools.islice(fires, CHUNK))
            if not batch:
                break
            with store.transaction() as tx:
                tx.record_fires(batch)
            count += len(batch)
        counts.append(count)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    print(f"  recorded {sum(counts):,} fires in {elapsed:.0f} s ({writers} writers)", flush=True)


def load(engine: sa.Engine, table: sa.Table, rows, label: str) -> None:
    started = time.perf_counter()
    batch: list[dict[str, Any]] = []
    count = 0
    with engine.begin() as conn:
        for row in rows:
            batch.append(row)
            if len(batch) == CHUNK:
                conn.execute(sa.insert(table), batch)
                count += len(batch)
                batch = []
        if batch:
            conn.execute(sa.insert(table), batch)
            count += len(batch)
    print(f"  loaded {count:,} {label} in {time.perf_counter() - started:.0f} s", flush=True)


def timer_rows(now: datetime):
    for i in range(10_000):
        due = now + timedelta(seconds=i)
        yield {
            "tenant_id": f"tenant-{i % 20}",
            "service_call_id": f"call-{i}",
            "correlation_id": f"corr-{i}",
            "due_at": due,
            "registered_at": now,
            "reached_at": None,
            "state": "Scheduled",
        }


def timed(app: Any, path: str, repeat: int) -> tuple[float, int]:
    async def run() -> tuple[float, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await client.get(path)  # warm up (templates, statement caches)
            times, status = [], 0
            for _ in range(repeat):
                started = time.perf_counter()
                response = await client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                status = response.status_code
            return statistics.median(times), status

    return asyncio.run(run())


def bench(store: str, jobs: int, fires: int, repeat: int, writers: int) -> None:
    url = fresh_url(store)
    engine = make_engine(url, pool_size=max(4, writers))
    schema.upgrade(engine)
    now = datetime.now(UTC).replace(microsecond=0)
    rng = random.Random(13)
    print(f"{store}: loading {jobs:,} jobs, {fires:,} fires, 10,000 timers", flush=True)
    load(engine, schedule_jobs, job_rows(jobs, now, rng), "jobs")
    with engine.connect() as conn:
        sample = [r[0] for r in conn.execute(sa.select(schedule_jobs.c.id).limit(5000))]
        middle = conn.execute(
            sa.select(schedule_jobs.c.id).order_by(schedule_jobs.c.id).offset(jobs // 2).limit(1)
        ).scalar()
        cron_job = conn.execute(
            sa.select(schedule_jobs.c.id).where(schedule_jobs.c.repeat.is_not(None)).limit(1)
        ).scalar()
    store_ = SQLAlchemyJobStore(engine)
    record(store_, fire_records(fires, now, rng, sample), writers)
    load(engine, timer_schedules, timer_rows(now), "timers")
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))
    clock = FakeClock(now)
    service = ScheduleService(store=store_, queue=SQLExecutionQueue(), clock=clock)
    app = create_dashboard(service, store=store_, clock=clock)
    import base64
    import json

    cursor = base64.urlsafe_b64encode(json.dumps(["", str(middle)]).encode()).decode().rstrip("=")
    pages = {
        "overview (1 h)": "/",
        "overview (6 h)": "/?window=360",
        "overview (24 h)": "/?window=1440",
        "jobs": "/jobs",
        "jobs, middle page": f"/jobs?cursor={cursor}",
        "jobs ?status=failed": "/jobs?status=failed",
        "jobs ?status=active (none)": "/jobs?status=active",
        "jobs ?topic": "/jobs?topic=topic.7",
        "jobs ?tenant&status": "/jobs?tenant_id=tenant-42&status=pending",
        "jobs ?owner": "/jobs?owner_id=owner-7",
        "jobs ?sort=due&status=pending": "/jobs?sort=due&status=pending",
        "jobs ?sort=updated&status=failed": "/jobs?sort=updated&status=failed",
        "jobs ?sort=due (windowed)": "/jobs?sort=due",
        "jobs ?q=payload text": "/jobs?q=nothing-matches-this",
        "job (one-shot)": f"/jobs/{sample[1]}",
        "job (cron)": f"/jobs/{cron_job}",
        "workers": "/workers",
        "timers": "/timers",
        "timers ?tenant": "/timers?tenant=tenant-3",
    }
    for name, path in pages.items():
        median, status = timed(app, path, repeat)
        flag = "" if median < 300 else "  (over 300 ms)"
        print(f"  {store:8} {name:28} {median:8.1f} ms  (HTTP {status}){flag}", flush=True)
    store_.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--fires", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7, help="requests per page (the median is printed)")
    parser.add_argument("--writers", type=int, default=16, help="threads writing the fires (default 16)")
    args = parser.parse_args()
    for store in ["sqlite", "postgres"] if args.store == "all" else [args.store]:
        bench(store, args.jobs, args.fires, args.repeat, args.writers)


if __name__ == "__main__":
    main()
