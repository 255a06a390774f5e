"""Syncing schedules declared in code: 1,000 declarations into an empty store, the same again
(nothing changed), then with 10% changed and 5% dropped, on SQLite and PostgreSQL. Prints the time
of each sync and the rows it wrote (job rows inserted and cancelled, declaration rows written).

Run:  .venv/bin/python bench/declared.py [--store sqlite|postgres|all] [--schedules N] [--repeat N]

PostgreSQL uses a fresh database on 127.0.0.1:5432, ``schedule_sdk_bench_declared`` unless
``SCHEDULE_DECLARED_BENCH_DB`` names another. Each figure is the median of ``--repeat`` runs,
each on a fresh store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from types import ModuleType
from typing import Any

import psycopg
from _stats import PG_ADMIN  # bench/ is on sys.path when run as a script

from schedule_sdk import ScheduleContainer, cron, every

BENCH_DB = os.environ.get("SCHEDULE_DECLARED_BENCH_DB", "schedule_sdk_bench_declared")


def fresh_url(store: str) -> str:
    if store == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(prefix='sdk-declared-bench-')}/bench.db"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{BENCH_DB}"


def declared_module(name: str, n: int, *, changed: float = 0.0, dropped: float = 0.0) -> ModuleType:
    """A module of ``n`` declared functions (half crons, half intervals); the first ``changed``
    share declares another payload, the last ``dropped`` share is left out."""
    module = ModuleType(name)
    keep = n - int(n * dropped)
    for i in range(keep):
        payload = {"i": i, "v": 2 if i < int(n * changed) else 1}

        def fn(event: Any) -> None:
            return None

        fn.__module__, fn.__name__, fn.__qualname__ = name, f"job_{i}", f"job_{i}"
        decorate: Callable[[Any], Any] = (
            cron(f"{i % 60} {i % 24} * * *", tz="Europe/Berlin", name=f"bench.job{i}", payload=payload)
            if i % 2
            else every(timedelta(minutes=5 + i % 55), name=f"bench.job{i}", payload=payload)
        )
        setattr(module, fn.__name__, decorate(fn))
    return module


def sync(url: str, module: ModuleType) -> tuple[float, int, dict[str, int]]:
    container = ScheduleContainer()
    container.config.from_dict({"database_url": url})
    container.declared_schedules().register(module)
    sync_ = container.declared_sync()
    container.store()  # migrations and connections are not the sync's time
    started = time.perf_counter()
    plan = sync_.apply()
    elapsed = time.perf_counter() - started
    container.shutdown_resources()
    actions = {a: len(plan.of(a)) for a in ("add", "change", "remove", "unchanged")}  # type: ignore[arg-type]
    return elapsed, plan.rows_written, actions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=["sqlite", "postgres", "all"], default="all")
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n = args.schedules
    v1 = declared_module("bench_v1", n)
    v2 = declared_module("bench_v2", n, changed=0.10, dropped=0.05)
    stores = ["sqlite", "postgres"] if args.store == "all" else [args.store]
    for store in stores:
        runs: dict[str, list[tuple[float, int, dict[str, int]]]] = {"empty": [], "again": [], "v2": []}
        for _ in range(args.repeat):
            url = fresh_url(store)
            runs["empty"].append(sync(url, v1))
            runs["again"].append(sync(url, v1))
            runs["v2"].append(sync(url, v2))
        for step, label in (
            ("empty", f"{n} declared into an empty store"),
            ("again", "the same again (nothing changed)"),
            ("v2", "10% changed, 5% dropped"),
        ):
            times = [r[0] for r in runs[step]]
            _, rows, actions = runs[step][-1]
            print(
                f"{store:8} {label:36} {statistics.median(times) * 1000:8.1f} ms  "
                f"rows written {rows:5}  {actions}"
            )


if __name__ == "__main__":
    main()
