"""WF, a Redis failover that loses writes (rq substrate through Sentinel). Prints figures.

Run:  .venv/bin/python bench/failover.py [--runs N] [--open N] [--lost N]

Each run starts a primary, a replica and three Sentinels of its own (tests/support/sentinel.py),
and one in-process worker on a SQLite store connected through ``redis+sentinel://``. ``--open``
one-shots due in an hour sit in the store (the reconcile scans them all); replication is then cut,
``--lost`` one-shots due 1 s later are scheduled (their entries reach the primary only), and the
primary is killed with SIGKILL. The Sentinels promote the replica, which lacks those entries.

-> promoted: the kill to the Sentinels naming the new primary (Sentinel's own detection and
   election: ``down-after-milliseconds`` 1000).
-> healed: the promotion to the last lost job's fire (the SDK reconnects, its heartbeat sees the
   new server and reconciles; every lost job is past due by then, so this is the heal time).
-> lost jobs (never fired), repeated fires, early fires: all must be 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from schedule_sdk import SCHEDULE_ARRIVED_EVENT, OneShotSpec, ScheduleArrivedEvent, ScheduleContainer  # noqa: E402
from tests.support.sentinel import SentinelCluster  # noqa: E402


def spec(seconds: float) -> OneShotSpec:
    return OneShotSpec(
        topic="bench.failover", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC"
    )


def one_run(folder: Path, open_jobs: int, lost_jobs: int) -> tuple[float, float, int, int, int]:
    cluster = SentinelCluster(folder).start()
    container = ScheduleContainer()
    container.config.from_dict(
        {
            "database_url": f"sqlite:///{folder / 'jobs.db'}",
            "redis_url": cluster.url,
            "rq_queue": "bench_failover",
            "reconcile_interval": 3600.0,
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
    try:
        worker.start()
        service.schedule_many([spec(3600) for _ in range(open_jobs)])
        assert cluster.synced()
        cluster.cut_replication()
        lost = service.schedule_many([spec(1.0) for _ in range(lost_jobs)])
        killed = time.time()
        cluster.kill_primary()
        promoted = cluster.wait_failover()
        ids = {job.id for job in lost}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with lock:
                if ids <= {e.scheduled_job_id for e in fired}:
                    break
            time.sleep(0.01)
        with lock:
            mine = [e for e in fired if e.scheduled_job_id in ids]
        last = max((e.fired_at.timestamp() for e in mine), default=float("nan"))
        missing = len(ids - {e.scheduled_job_id for e in mine})
        repeated = len(mine) - len({e.scheduled_job_id for e in mine})
        early = sum(e.fired_at < e.scheduled_for for e in mine)
        return promoted - killed, last - promoted, missing, repeated, early
    finally:
        worker.stop()
        container.shutdown_resources()
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--open", type=int, default=10_000, help="open jobs the reconcile scans")
    parser.add_argument("--lost", type=int, default=500, help="jobs whose entries the failover loses")
    args = parser.parse_args()
    rows = []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench_failover_") as folder:
            row = one_run(Path(folder), args.open, args.lost)
        rows.append(row)
        print(
            f"run {run + 1}: promoted {row[0]:.2f} s after the kill, "
            f"healed {row[1]:.2f} s after the promotion, "
            f"lost {row[2]}, repeated {row[3]}, early {row[4]}",
            flush=True,
        )
    print(
        f"WF  open {args.open}, lost {args.lost}, {args.runs} runs: "
        f"promoted median {statistics.median(r[0] for r in rows):.2f} s, "
        f"healed median {statistics.median(r[1] for r in rows):.2f} s "
        f"(min {min(r[1] for r in rows):.2f}, max {max(r[1] for r in rows):.2f}); "
        f"lost {sum(r[2] for r in rows)}, repeated {sum(r[3] for r in rows)}, early {sum(r[4] for r in rows)}"
    )


if __name__ == "__main__":
    main()
