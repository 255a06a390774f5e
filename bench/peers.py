"""schedule_sdk beside APScheduler 3 (SQLAlchemy job store) in the same run. Prints figures and ratios.

Run:  .venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/peers.py [--store sqlite|postgres|all]
      [--runs N]

W1  20,000 one-shots due in an hour from one caller, one call per job: schedule_sdk
    ``schedule_at`` and ``schedule_many`` (one call) vs APScheduler 3 ``add_job`` with a date
    trigger on a started (paused) ``BackgroundScheduler`` whose job store is ``SQLAlchemyJobStore``
    on the same database kind. Each side gets a fresh database; the runs alternate, so both see
    the same machine load. Medians of ``--runs`` runs are printed with the load average.

PostgreSQL databases are created fresh per run (``SCHEDULE_BENCH_DB``, as bench/core.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from core import PG_BENCH, Bench, fresh_url, spec  # bench/ is on sys.path when run as a script

N = 20_000


def noop() -> None:
    """The APScheduler job function (never runs in W1: the jobs are due in an hour)."""


def sdk_schedule_at(store: str) -> float:
    bench = Bench(store)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    bench.service.schedule_at(spec(run_at))  # warm up (schema, pool)
    specs = [spec(run_at) for _ in range(N)]
    started = time.perf_counter()
    for one in specs:
        bench.service.schedule_at(one)
    elapsed = time.perf_counter() - started
    bench.close()
    return N / elapsed


def sdk_schedule_many(store: str) -> float:
    bench = Bench(store)
    run_at = datetime.now(UTC) + timedelta(hours=1)
    bench.service.schedule_many([spec(run_at)])
    specs = [spec(run_at) for _ in range(N)]
    started = time.perf_counter()
    bench.service.schedule_many(specs)
    elapsed = time.perf_counter() - started
    bench.close()
    return N / elapsed


def apscheduler_add_job(store: str) -> float:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    url = fresh_url(store)
    if store == "postgres":
        url = PG_BENCH
    scheduler = BackgroundScheduler(jobstores={"default": SQLAlchemyJobStore(url=url)}, timezone=UTC)
    scheduler.start(paused=True)  # started: add_job writes to the store at once
    run_at = datetime.now(UTC) + timedelta(hours=1)
    scheduler.add_job(noop, "date", run_date=run_at)  # warm up
    started = time.perf_counter()
    for _ in range(N):
        scheduler.add_job(noop, "date", run_date=run_at)
    elapsed = time.perf_counter() - started
    scheduler.shutdown(wait=False)
    return N / elapsed


SIDES: dict[str, Callable[[str], float]] = {
    "schedule_sdk schedule_at": sdk_schedule_at,
    "schedule_sdk schedule_many": sdk_schedule_many,
    "APScheduler 3 add_job": apscheduler_add_job,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for store in ["sqlite", "postgres"] if args.store == "all" else [args.store]:
        rates: dict[str, list[float]] = {name: [] for name in SIDES}
        loads = []
        for _ in range(args.runs):
            for name, run in SIDES.items():
                loads.append(os.getloadavg()[0])
                rates[name].append(run(store))
        peer = statistics.median(rates["APScheduler 3 add_job"])
        print(f"W1 {store}: median of {args.runs} runs, load average {min(loads):.1f}-{max(loads):.1f}")
        for name, values in rates.items():
            runs = ", ".join(f"{v:,.0f}" for v in values)
            median = statistics.median(values)
            print(f"  {name:28} {median:>8,.0f} jobs/s ({median / peer:4.1f}x APScheduler)  runs: {runs}")


if __name__ == "__main__":
    main()
