"""WL, a Redis that loses every entry (rq substrate): a ``FLUSHALL`` with jobs about to fall due.
Prints figures.

Run:  .venv/bin/python bench/flush_heal.py [--runs N] [--open N] [--due N] [--database-url URL]

Each run starts a redis-server of its own without persistence (tests/support/rq_fixtures.py) and
one in-process worker with the default settings (the periodic reconcile every 300 s) on a SQLite
store (or ``--database-url``). ``--open`` one-shots due in an hour sit in the store and in Redis
(the heal re-adds them all); ``--due`` one-shots are scheduled due 0.5 s later, and Redis is
flushed at once (``FLUSHALL``, then ``CONFIG RESETSTAT``: what a restart without persistence
leaves, but the same run id, so only the namespace's marker tells).

-> found: the flush to the worker's look that found the marker missing (the heal's ``lost_at``).
-> healed: how long the heal (the reconcile of every open row) took, and how many entries it
   handed over again (``--open`` + ``--due``).
-> last due fire: the flush to the last of the ``--due`` jobs' fires, and how late it was past its
   due instant. Lost jobs (never fired), repeated fires, early fires: all must be 0.

Then the cost of the look itself, per maintenance beat: the mean and p99 of
``RQExecutionQueue.incarnation()`` (``INFO server``, ``SET NX`` and ``GET`` of the marker, one
round trip) over 2,000 calls, next to a bare ``INFO server`` (the look before the marker), with
``--open`` entries in Redis: neither depends on their number.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, OneShotSpec, ScheduleArrivedEvent, ScheduleContainer  # noqa: E402
from schedule_sdk.substrates.rq.plumbing import Keys  # noqa: E402
from tests.support.rq_fixtures import PrivateRedis  # noqa: E402

LOOKS = 2000
BATCH = 20_000


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="bench.flush", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def look_cost(container: ScheduleContainer, client: redis.Redis) -> tuple[float, float, float, float]:
    """Mean and p99 (µs) of the worker's look, then of a bare ``INFO server``."""
    queue = container.queue()
    figures = []
    for call in (queue.incarnation, lambda: client.info("server")):
        took = []
        for _ in range(LOOKS):
            started = time.perf_counter()
            call()
            took.append((time.perf_counter() - started) * 1e6)
        took.sort()
        figures += [statistics.fmean(took), took[int(len(took) * 0.99)]]
    return figures[0], figures[1], figures[2], figures[3]


def one_run(folder: Path, open_jobs: int, due_jobs: int, database_url: str | None) -> dict[str, float]:
    server = PrivateRedis(folder, persistent=False)
    server.start()
    queue_name = "bench_flush"
    container = ScheduleContainer()
    container.config.from_dict(
        {
            "database_url": database_url or f"sqlite:///{folder / 'jobs.db'}",
            "redis_url": server.url,
            "rq_queue": queue_name,
        }
    )
    fired: list[ScheduleArrivedEvent] = []
    lock = threading.Lock()

    def record(event: ScheduleArrivedEvent) -> None:
        with lock:
            fired.append(event)

    container.listeners().connect(SCHEDULE_ARRIVED_EVENT, record)
    service = container.schedule_service()
    worker = container.worker()
    client = redis.Redis(port=server.port)
    try:
        worker.start()
        for start in range(0, open_jobs, BATCH):
            service.schedule_many([spec(3600) for _ in range(min(BATCH, open_jobs - start))])
        mean, p99, bare_mean, bare_p99 = look_cost(container, client)
        due = service.schedule_many([spec(0.5) for _ in range(due_jobs)])
        flushed = time.time()
        client.flushall()
        client.config_resetstat()
        ids = {job.id for job in due}
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with lock:
                if ids <= {e.scheduled_job_id for e in fired}:
                    break
            time.sleep(0.01)
        mine = [e for e in fired if e.scheduled_job_id in ids]
        deadline = time.monotonic() + 600
        while (healed := client.get(Keys(queue_name).healed)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        note = json.loads(healed) if healed else {}
        last = max(mine, key=lambda e: e.fired_at, default=None)
        return {
            "found": note.get("lost_at", float("nan")) - flushed,
            "heal": note.get("took", float("nan")),
            "healed": note.get("healed", -1),
            "last": float("nan") if last is None else last.fired_at.timestamp() - flushed,
            "late": float("nan") if last is None else (last.fired_at - last.scheduled_for).total_seconds(),
            "lost": len(ids - {e.scheduled_job_id for e in mine}),
            "repeated": len(mine) - len({e.scheduled_job_id for e in mine}),
            "early": sum(e.fired_at < e.scheduled_for for e in mine),
            "look": mean,
            "look99": p99,
            "bare": bare_mean,
            "bare99": bare_p99,
        }
    finally:
        worker.stop()
        container.shutdown_resources()
        client.close()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--open", type=int, default=10_000, help="open jobs due in an hour (the heal re-adds them)"
    )
    parser.add_argument("--due", type=int, default=20, help="jobs due 0.5 s after the flush")
    parser.add_argument(
        "--database-url", default=None, help="the store (default: a fresh SQLite file per run)"
    )
    args = parser.parse_args()
    rows = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench_flush_") as folder:
            row = one_run(Path(folder), args.open, args.due, args.database_url)
        rows.append(row)
        print(
            f"run {run + 1}: found {row['found']:.2f} s after the flush, heal of {row['healed']} entries "
            f"took {row['heal']:.2f} s, last due fire {row['last']:.2f} s after the flush "
            f"({row['late']:.2f} s late); lost {row['lost']}, repeated {row['repeated']}, "
            f"early {row['early']}; "
            f"look {row['look']:.0f} µs (p99 {row['look99']:.0f}), bare INFO {row['bare']:.0f} µs "
            f"(p99 {row['bare99']:.0f})",
            flush=True,
        )

    def med(name: str) -> float:
        return statistics.median(r[name] for r in rows)

    print(
        f"WL  open {args.open}, due {args.due}, {args.runs} runs: found median {med('found'):.2f} s, "
        f"heal median {med('heal'):.2f} s, last due fire median {med('last'):.2f} s after the flush "
        f"(max {max(r['last'] for r in rows):.2f}); lost {sum(r['lost'] for r in rows)}, "
        f"repeated {sum(r['repeated'] for r in rows)}, early {sum(r['early'] for r in rows)}; "
        f"look per beat median {med('look'):.0f} µs (bare INFO server {med('bare'):.0f} µs)"
    )


if __name__ == "__main__":
    main()
