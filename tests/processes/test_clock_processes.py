"""Worker processes whose own clock disagrees with the database's (libfaketime shifts it by +2 s or
-2 s): they claim by the database's clock, so none fires early and most fire within a heartbeat
(a worker claiming by its own clock would fire all 2 s early or late); the
worker registry shows the offset each one measured; one whose offset is beyond
``max_clock_offset`` claims nothing (and its rq pump does not lead).

Fires are judged by the database's clock: each fire is inserted into ``observed_fires`` by the
worker's listener, stamped with ``clock_timestamp()`` (tests/procs/worker.py). PostgreSQL only: a
SQLite store has no clock of its own, its time is the clock of the machine its processes share
(a process whose clock is shifted on that machine is not a topology SQLite serves).
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import JobStatus, OneShotSpec
from schedule_sdk.core.health import container_health
from schedule_sdk.ports import WorkerInfo, WorkerRegistry, require
from tests.support.observed import create_observed, observed
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess, faketime_env

#: Seconds between a worker's heartbeats with the backends' settings (lease 5 s, dead_after 10 s):
#: ``min(lease / 3, dead_after / 4, 1)``.
BEAT = 1.0


def worker_row(h, worker_id: str) -> WorkerInfo | None:
    return next(
        (w for w in require(h.container.store(), WorkerRegistry, "the test").workers() if w.id == worker_id),
        None,
    )


def spec(run_at: datetime) -> OneShotSpec:
    return OneShotSpec(topic="clocks.job", run_at=run_at, timezone="UTC")


def shifted_worker(backend, events: Path, shift: str, worker_id: str, **settings: object) -> WorkerProcess:
    env = {**faketime_env(shift), "SDK_TEST_OBSERVE": "1"}
    return WorkerProcess(backend, events, env=env, worker_id=worker_id, **settings)


def assert_fired_on_time(h, database_url: str, jobs: list[str], cancelled: list[str], log: str = "") -> None:
    """Every acknowledged job fired once by the database's clock: none early, and half of them
    within a heartbeat; none cancelled fired.

    A worker that claimed by its own clock would fire every job as far off as its clock is: early
    (a clock ahead) or late (behind, so no median within a heartbeat). A single fire's lateness is not
    bounded: under a busy suite on a two-core machine, a few of a worker's fires have been seen
    later than the shift, and that is the machine, not the clock a claim is made by."""
    fires = observed(database_url)
    by_job: dict[str, list[datetime]] = {}
    for fire in fires:
        by_job.setdefault(fire.job_id, []).append(fire.at)
    assert sorted(by_job) == sorted(jobs), (len(by_job), len(jobs))
    assert all(len(ats) == 1 for ats in by_job.values()), [j for j, ats in by_job.items() if len(ats) > 1]
    assert not set(cancelled) & set(by_job)
    lateness = {j: (by_job[j][0] - h.job(j).run_at).total_seconds() for j in jobs}
    early = {j: late for j, late in lateness.items() if late < 0}
    assert not early, f"fired early by the database's clock: {sorted(early.values())[:5]}"
    ordered = sorted(lateness.values())
    assert statistics.median(ordered) <= BEAT, (ordered, log[-4000:])


@pytest.mark.slow
@pytest.mark.timeout(120)  # starts a worker process, then waits for 40 fires spread over 4 s
@pytest.mark.parametrize(("shift", "offset"), [("+2s", -2.0), ("-2s", 2.0)], ids=["ahead-2s", "behind-2s"])
def test_a_worker_whose_clock_is_shifted_fires_nothing_early_and_nothing_a_beat_late(
    postgres_backend, tmp_path, shift, offset
):
    backend = postgres_backend
    create_observed(backend.database_url)
    h = backend.harness()
    worker = shifted_worker(backend, tmp_path / "events.log", shift, "shifted")
    try:
        row = worker_row(h, "shifted")
        assert row is not None and row.clock_offset is not None and row.clock_error is not None
        assert row.clock_offset == pytest.approx(offset, abs=0.25), row
        assert 0 <= row.clock_error < 0.25, row
        start = datetime.now(UTC) + timedelta(seconds=1)
        jobs = [h.service.schedule_at(spec(start + timedelta(seconds=i * 0.1))).id for i in range(40)]
        cancelled = [h.service.schedule_at(spec(start + timedelta(seconds=1))).id for _ in range(5)]
        for job_id in cancelled:
            h.service.cancel(job_id)
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs), 30)
    finally:
        assert worker.terminate() == 0
    assert_fired_on_time(h, backend.database_url, jobs, cancelled, worker.log())


@pytest.mark.slow
@pytest.mark.timeout(120)  # starts two worker processes, one after a job fell due
def test_a_worker_whose_offset_is_beyond_the_bound_claims_nothing(postgres_backend, tmp_path):
    backend = postgres_backend
    create_observed(backend.database_url)
    h = backend.harness(max_clock_offset=1.0)
    events = tmp_path / "events.log"
    refusing = shifted_worker(backend, events, "+2s", "refusing", max_clock_offset=1.0)
    honest = None
    try:
        row = worker_row(h, "refusing")
        assert row is not None and row.clock_offset == pytest.approx(-2.0, abs=0.25), row
        workers = next(c for c in container_health(h.container).checks if c.name == "workers")
        assert not workers.ok and "1 more claim nothing" in workers.detail and "refusing" in workers.detail
        job = h.service.schedule_at(spec(datetime.now(UTC) + timedelta(seconds=0.3))).id
        # the job is due, and 1.5 s more pass (a beat and a half): the refusing worker leaves it
        assert wait_until(lambda: datetime.now(UTC) > h.job(job).run_at + timedelta(seconds=1.5), 10)
        assert h.job(job).status is JobStatus.PENDING
        assert observed(backend.database_url) == []
        honest = shifted_worker(backend, events, "+0s", "honest")
        assert wait_until(lambda: h.job(job).status is JobStatus.COMPLETED, 15)
    finally:
        codes = [w.terminate() for w in (refusing, honest) if w is not None]
    assert codes == [0, 0]
    assert [(f.job_id, f.worker) for f in observed(backend.database_url)] == [(job, "honest")]
