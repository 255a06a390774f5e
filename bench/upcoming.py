"""The "Next 24 h" page and ``upcoming`` reads with 1,000 open jobs, 2 s intervals among them:
each page's time to answer (median of several requests, in-process through the ASGI app: server
time, queries plus rendering) and the service reads behind them. Prints figures.

Run:  .venv/bin/python bench/upcoming.py [--store sqlite|postgres|all] [--jobs N] [--repeat N]

Data (through ``ScheduleService``): N open jobs over 20 topics and 10 tenants: 20% every 2 s,
10% every minute, 20% on crons (``*/5 * * * *``, ``0 * * * *``, ``30 2 * * *`` in Europe/Berlin,
``*/1 * * * *``), 50% one-shots due within the day. PostgreSQL uses a fresh database on
127.0.0.1:5432, ``schedule_sdk_bench_upcoming`` unless ``SCHEDULE_UPCOMING_BENCH_DB`` names
another. To compare with another commit, run this file with ``PYTHONPATH`` set to that commit's
checkout (the pages it does not know answer as its ``/upcoming`` does).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
from _stats import PG_ADMIN  # bench/ is on sys.path when run as a script

import schedule_sdk
from schedule_sdk import CronRepeat, IntervalRepeat, JobMetadata, OneShotSpec, RepeatSpec
from schedule_sdk.adapters.sql import schema
from schedule_sdk.adapters.sql.engine import make_engine
from schedule_sdk.adapters.sql.store import SQLAlchemyJobStore
from schedule_sdk.core.service import ScheduleService
from schedule_sdk.dashboard import create_dashboard
from schedule_sdk.substrates.sql.queue import SQLExecutionQueue
from schedule_sdk.testing import FakeClock

BENCH_DB = os.environ.get("SCHEDULE_UPCOMING_BENCH_DB", "schedule_sdk_bench_upcoming")
CRONS = [
    ("*/5 * * * *", "UTC"),
    ("0 * * * *", "UTC"),
    ("30 2 * * *", "Europe/Berlin"),
    ("*/1 * * * *", "UTC"),
]


def fresh_url(store: str) -> str:
    if store == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(prefix='sdk-upcoming-bench-')}/bench.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{BENCH_DB}"


def seed(service: ScheduleService, jobs: int, now: datetime) -> None:
    for i in range(jobs):
        meta = JobMetadata(tenant_id=f"tenant-{i % 10}", owner_id=f"owner-{i % 50}")
        topic = f"topic.{i % 20}"
        kind = i % 10
        if kind < 2:
            repeat: IntervalRepeat | CronRepeat = IntervalRepeat(every_ms=2000)
        elif kind == 2:
            repeat = IntervalRepeat(every_ms=60_000)
        elif kind < 5:
            expression, zone = CRONS[i % len(CRONS)]
            repeat = CronRepeat(expression=expression, timezone=zone)
        else:
            run_at = now + timedelta(seconds=(i * 86) % 86_400 + 1)
            service.schedule_at(OneShotSpec(topic=topic, run_at=run_at, timezone="UTC", metadata=meta))
            continue
        service.schedule_repeat(RepeatSpec(topic=topic, timezone="UTC", repeat=repeat, metadata=meta))


def timed_page(app: Any, path: str, repeat: int) -> tuple[float, int, int]:
    async def run() -> tuple[float, int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            await client.get(path)  # warm up (templates, statement caches)
            times, status, size = [], 0, 0
            for _ in range(repeat):
                started = time.perf_counter()
                response = await client.get(path)
                times.append((time.perf_counter() - started) * 1000)
                status, size = response.status_code, len(response.content)
            return statistics.median(times), status, size

    return asyncio.run(run())


def timed_call(call: Callable[[], object], repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def bench(store: str, jobs: int, repeat: int) -> None:
    url = fresh_url(store)
    engine = make_engine(url)
    schema.upgrade(engine)
    now = datetime.now(UTC).replace(microsecond=0)
    store_ = SQLAlchemyJobStore(engine)
    clock = FakeClock(now)
    service = ScheduleService(store=store_, queue=SQLExecutionQueue(), clock=clock)
    started = time.perf_counter()
    seed(service, jobs, now)
    print(f"{store}: {jobs:,} open jobs seeded in {time.perf_counter() - started:.1f} s", flush=True)
    app = create_dashboard(service, store=store_, clock=clock)
    day = timedelta(hours=24)
    for name, path in (
        ("page /upcoming (default view)", "/upcoming"),
        ("page /upcoming?view=timeline", "/upcoming?view=timeline"),
        ("page /upcoming?topic=topic.0", "/upcoming?topic=topic.0"),
    ):
        ms, status, size = timed_page(app, path, repeat)
        print(f"  {name:40} {ms:8.1f} ms  (HTTP {status}, {size:,} bytes)", flush=True)
    flat = timed_call(lambda: service.upcoming(day, limit=1000), repeat)
    print(f"  {'upcoming(24 h, limit=1000)':40} {flat:8.1f} ms")
    if hasattr(service, "upcoming_by_job"):
        grouped = service.upcoming_by_job(day)
        by_job = timed_call(lambda: service.upcoming_by_job(day), repeat)
        seen = f"{grouped.jobs:,} jobs, {grouped.fires:,} fires"
        print(f"  {'upcoming_by_job(24 h)':40} {by_job:8.1f} ms  ({seen})")
    store_.close()
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="all", choices=["sqlite", "postgres", "all"])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"schedule_sdk from {os.path.dirname(schedule_sdk.__file__)}")
    for store in ("sqlite", "postgres") if args.store == "all" else (args.store,):
        bench(store, args.jobs, args.repeat)


if __name__ == "__main__":
    main()
