"""Recovery from a kill at each crash point of an rq hand-off. Prints figures.

Run:  .venv/bin/python bench/crash_points.py [--runs N] [--stores sqlite,postgres]

Each run plays the scenarios of tests/processes/test_rq_crash_points.py (a process killed with
SIGKILL between two steps of a hand-off, then a new worker started) and takes, from each, the time
from the new worker's spawn to the fire of the job the killed process had in hand. The documented
bound is ``lease + 2`` s (docs/explanation/guarantees.md); the tests assert only that the job
fires once, in the new worker, with no periodic reconcile.

Needs Redis on 127.0.0.1:6379 (a Redis db of this run's own) and, for ``postgres``, the PostgreSQL
server on 127.0.0.1:5432 (databases of this run's own, dropped at the end).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import migrate  # noqa: E402
from tests.processes import test_rq_crash_points as points  # noqa: E402
from tests.support import services  # noqa: E402
from tests.support.rq_fixtures import made_harnesses  # noqa: E402

SCENARIOS: list[Callable[..., None]] = [
    points.test_killed_after_the_consumer_took_the_fire_and_before_the_claim,
    points.test_app_killed_after_the_scheduling_commit_and_before_committed,
    points.test_worker_killed_after_recording_an_interval_s_next_occurrence,
    points.test_worker_killed_after_recording_a_retry,
    points.test_worker_killed_after_releasing_expired_claims,
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stores", default="sqlite,postgres")
    args = parser.parse_args()
    stores = args.stores.split(",")
    redis = services.RedisDbs()
    redis_url = redis.allocate()
    pg = services.PostgresDatabases() if "postgres" in stores else None
    if pg is not None:
        pg.create_template(migrate)
    bound = points.LEASE + 2.0
    print(f"crash points: {len(SCENARIOS)} scenarios x {args.runs} runs; bound lease + 2 = {bound:.1f} s")
    try:
        for store in stores:
            databases = pg if store == "postgres" else None
            figures: dict[str, list[float]] = {}
            for _ in range(args.runs):
                for scenario in SCENARIOS:
                    with tempfile.TemporaryDirectory() as tmp:
                        url = databases.lease("bench") if databases else f"sqlite:///{tmp}/jobs.db"
                        services.RedisDbs.flush(redis_url)
                        settings = {
                            "database_url": url,
                            "substrate": "rq",
                            "redis_url": redis_url,
                            "rq_queue": services.queue_name("bench"),
                            "lease_seconds": points.LEASE,
                            "stop_timeout": 2.0,
                        }
                        before = len(points.RECOVERIES)
                        with made_harnesses() as make:
                            scenario(settings, make, Path(tmp))
                        figures.setdefault(scenario.__name__, []).extend(points.RECOVERIES[before:])
                        if databases:
                            databases.give_back(url)
            print(f"\n{store}: seconds from the new worker's spawn to the fire (median / max of {args.runs})")
            for name, values in figures.items():
                late = sum(v > bound for v in values)
                label = name.removeprefix("test_")
                print(f"  {statistics.median(values):5.2f} / {max(values):5.2f}  over bound: {late}  {label}")
    finally:
        redis.close()
        if pg is not None:
            pg.drop_all()
            pg.close()


if __name__ == "__main__":
    main()
