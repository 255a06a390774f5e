"""Overlap policies with real worker processes on every backend (store x substrate): two worker
processes with a slow listener, and a worker killed -9 mid-fire (``allow``: mid-run).

The listeners log their own enter and exit times and the event's ``scheduled_for``
(tests/procs/worker.py with $SDK_TEST_TIMES); what did not fire is read from the fire history and
from the ``schedule.missed`` events the workers received.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from schedule_sdk import FireOutcome, IntervalRepeat, JobStatus, RepeatSpec, ScheduledJob
from tests.support.waiting import wait_until
from tests.support.worker_process import WorkerProcess

EVERY_MS = 300  # the listener runs 1 s: about three occurrences come due during each fire
SLEEP = 1.0


@dataclass(frozen=True)
class Fire:
    occurrence: int
    pid: str
    entered: float
    exited: float
    scheduled_for: float


def fires_of(events: Path, job_id: str) -> list[Fire]:
    if not events.exists():
        return []
    rows = [line.split() for line in events.read_text().splitlines() if line.strip()]
    found = [Fire(int(r[1]), r[3], float(r[4]), float(r[5]), float(r[6])) for r in rows if r[0] == job_id]
    return sorted(found, key=lambda f: f.entered)


def missed_of(missed: Path, job_id: str) -> list[tuple[str, int]]:
    if not missed.exists():
        return []
    rows = [line.split() for line in missed.read_text().splitlines() if line.strip()]
    return [(r[1], int(r[2])) for r in rows if r[0] == job_id]


def slow_workers(backend, tmp_path: Path, count: int = 2, **overrides: object) -> list[WorkerProcess]:
    return [
        WorkerProcess(
            backend,
            tmp_path / "events.log",
            listener_sleep=overrides.pop("listener_sleep", SLEEP) if i == 0 else SLEEP,
            worker_concurrency=4,
            SDK_TEST_TIMES="1",
            SDK_TEST_MISSED=str(tmp_path / "missed.log"),
            **overrides,
        )
        for i in range(count)
    ]


def run_policy(backend, tmp_path: Path, overlap: str, limit: int = 3):
    """Two slow worker processes fire a job every 300 ms with ``overlap`` until its ``limit``."""
    h = backend.harness()
    workers = slow_workers(backend, tmp_path)
    try:
        spec = RepeatSpec(
            topic="faults.overlap",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=EVERY_MS),
            overlap=overlap,  # type: ignore[arg-type]
            limit=limit,
        )
        job = h.service.schedule_repeat(spec)
        assert h.job(job.id).overlap == overlap
        assert wait_until(lambda: h.job(job.id).status is JobStatus.COMPLETED, 30), h.job(job.id)
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0]
    fires = fires_of(tmp_path / "events.log", job.id)
    history = sorted(h.service.history(job.id, limit=100), key=lambda f: (f.occurrence, f.fired_at))
    return h.job(job.id), fires, history, missed_of(tmp_path / "missed.log", job.id)


def assert_never_overlapping(fires: list[Fire]) -> None:
    for before, after in zip(fires, fires[1:], strict=False):
        assert after.entered >= before.exited, (before, after)


def assert_overlap_events(missed: list[tuple[str, int]]) -> None:
    """One ``overlap`` event per skipped entry; on a loaded machine a fire may also be taken late
    enough for occurrences due before it started to be the misfire policy's (reason ``misfire``)."""
    assert [reason for reason, _ in missed if reason == "overlap"] == ["overlap", "overlap"], missed
    assert {reason for reason, _ in missed} <= {"overlap", "misfire"} and all(n >= 1 for _, n in missed)


@pytest.mark.slow
def test_skip_never_fires_what_came_due_while_the_previous_fire_ran(backend, tmp_path):
    job, fires, history, missed = run_policy(backend, tmp_path, "skip")
    assert job.occurrence_count == 3 and len(fires) == 3, fires
    assert_never_overlapping(fires)
    for before, after in zip(fires, fires[1:], strict=False):
        assert after.scheduled_for > before.exited, (before, after)  # due after the run: not skipped
    # between two fires, one skipped entry for what came due during the first
    skipped = [f for f in history if f.outcome is FireOutcome.SKIPPED]
    assert len(skipped) == 2 and all(f.error and f.error.startswith("overlap: ") for f in skipped)
    assert [f.occurrence for f in fires] == [1, 3, 5] and [f.occurrence for f in skipped] == [2, 4]
    assert_overlap_events(missed)


@pytest.mark.slow
def test_buffer_one_fires_one_waiting_occurrence_as_soon_as_the_running_one_ends(backend, tmp_path):
    job, fires, history, missed = run_policy(backend, tmp_path, "buffer_one")
    assert job.occurrence_count == 3 and len(fires) == 3, fires
    assert_never_overlapping(fires)
    for before, after in zip(fires, fires[1:], strict=False):
        # the buffered occurrence came due while the previous fire ran
        assert before.entered < after.scheduled_for <= before.exited, (before, after)
    skipped = [f for f in history if f.outcome is FireOutcome.SKIPPED]
    assert len(skipped) == 2 and all(f.error and f.error.startswith("overlap: ") for f in skipped)
    assert_overlap_events(missed)
    # the skipped ones are the earlier ones: each is due before the buffered fire that follows it
    for skip, buffered in zip(skipped, fires[1:], strict=True):
        assert skip.due_at.timestamp() < buffered.scheduled_for


@pytest.mark.slow
def test_a_worker_killed_mid_fire_does_not_keep_a_skip_job_running(backend, tmp_path):
    events = tmp_path / "events.log"
    h = backend.harness(lease_seconds=60.0, dead_after=2.0)
    # the victim's listener would run for a minute; the lease is a minute too: only the dead-worker
    # machinery can release its fire in time
    victim = WorkerProcess(
        backend,
        events,
        worker_id="victim",
        lease_seconds=60.0,
        dead_after=2.0,
        listener_sleep=60.0,
        SDK_TEST_TIMES="1",
    )
    spec = RepeatSpec(
        topic="faults.overlap",
        timezone="UTC",
        repeat=IntervalRepeat(every_ms=EVERY_MS),
        overlap="skip",
        limit=2,
    )
    job = h.service.schedule_repeat(spec)
    assert wait_until(lambda: h.job(job.id).claimed_by == "victim", 15), h.job(job.id)
    victim.kill()
    survivor = WorkerProcess(
        backend, events, lease_seconds=60.0, dead_after=2.0, listener_sleep=0.2, SDK_TEST_TIMES="1"
    )
    try:
        assert wait_until(lambda: h.job(job.id).status is JobStatus.COMPLETED, 2.0 + 1 + 15), h.job(job.id)
    finally:
        assert survivor.terminate() == 0
    fires = fires_of(events, job.id)
    assert [f.occurrence for f in fires][:1] == [1]  # the killed fire ran again, elsewhere
    assert {f.pid for f in fires} == {str(survivor.proc.pid)}
    assert h.job(job.id).occurrence_count == 2


# -- allow: every occurrence fires at its due time, alongside the earlier ones -------------------

ALLOW_EVERY_MS = 1000  # the listener runs 2.5 s: each fire overlaps the next two
ALLOW_SLEEP = 2.5


def allow_spec(limit: int) -> RepeatSpec:
    return RepeatSpec(
        topic="faults.overlap",
        timezone="UTC",
        repeat=IntervalRepeat(every_ms=ALLOW_EVERY_MS),
        overlap="allow",
        limit=limit,
    )


def runs_of(h, job_id: str) -> list[ScheduledJob]:
    """The runs of ``job_id`` (rows with ``run_of``), by occurrence."""
    items = h.service.list(topic="faults.overlap", limit=100).items
    return sorted((j for j in items if j.run_of == job_id), key=lambda j: (j.occurrence, j.id))


def all_done(h, job_id: str, limit: int) -> bool:
    """The job has handed over its ``limit`` occurrences and every run of them has completed."""
    runs = runs_of(h, job_id)
    return (
        h.job(job_id).status is JobStatus.COMPLETED
        and len(runs) >= limit
        and all(r.status is JobStatus.COMPLETED for r in runs)
    )


@pytest.mark.slow
def test_allow_fires_each_occurrence_at_its_due_time_while_earlier_ones_still_run(backend, tmp_path):
    limit = 4
    h = backend.harness()
    workers = [
        WorkerProcess(
            backend,
            tmp_path / "events.log",
            listener_sleep=ALLOW_SLEEP,
            worker_concurrency=4,
            SDK_TEST_TIMES="1",
            SDK_TEST_MISSED=str(tmp_path / "missed.log"),
        )
        for _ in range(2)
    ]
    try:
        job = h.service.schedule_repeat(allow_spec(limit))
        assert h.job(job.id).overlap == "allow"
        assert wait_until(lambda: all_done(h, job.id, limit), 25), (h.job(job.id), runs_of(h, job.id))
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0]
    fires = fires_of(tmp_path / "events.log", job.id)  # the listeners' own times, under the job's id
    assert {f.occurrence for f in fires} == set(range(1, limit + 1)), fires
    for f in fires:
        assert f.entered >= f.scheduled_for, f  # never early
    # fires overlap: a fire starts while an earlier one still runs
    overlapping = [(a, b) for a, b in zip(fires, fires[1:], strict=False) if b.entered < a.exited]
    assert overlapping, fires
    # one run per occurrence, visible with the job it runs for, due at that occurrence
    runs = runs_of(h, job.id)
    assert [r.occurrence for r in runs] == list(range(1, limit + 1)), runs
    assert all(r.repeat is None and r.status is JobStatus.COMPLETED for r in runs)
    assert [r.scheduled_for for r in runs] == sorted({r.scheduled_for for r in runs})
    by_occurrence = {f.occurrence: f for f in fires}
    for r in runs:
        assert by_occurrence[r.occurrence].scheduled_for == pytest.approx(
            r.scheduled_for.timestamp(), abs=1e-3
        )
    parent = h.job(job.id)
    assert parent.occurrence_count == limit and parent.run_of is None
    # the job's history lists every occurrence's fire
    history = h.service.history(job.id, limit=100)
    succeeded = {f.occurrence for f in history if f.outcome is FireOutcome.SUCCEEDED}
    assert succeeded == set(range(1, limit + 1)), history
    assert all(f.job_id == job.id for f in history)


@pytest.mark.slow
def test_a_run_killed_mid_fire_fires_again_elsewhere_and_no_occurrence_spawns_twice(backend, tmp_path):
    limit = 3
    events = tmp_path / "events.log"
    h = backend.harness(lease_seconds=60.0, dead_after=2.0)
    # the victim's listener would run for a minute; the lease is a minute too: only the dead-worker
    # machinery can release its runs in time
    victim = WorkerProcess(
        backend,
        events,
        worker_id="victim",
        lease_seconds=60.0,
        dead_after=2.0,
        listener_sleep=60.0,
        worker_concurrency=4,
        SDK_TEST_TIMES="1",
    )
    job = h.service.schedule_repeat(allow_spec(limit))
    in_flight = lambda: [r for r in runs_of(h, job.id) if r.claimed_by == "victim"]  # noqa: E731
    assert wait_until(in_flight, 15), (h.job(job.id), runs_of(h, job.id))
    victim.kill()
    survivor = WorkerProcess(
        backend, events, lease_seconds=60.0, dead_after=2.0, listener_sleep=0.2, SDK_TEST_TIMES="1"
    )
    try:
        assert wait_until(lambda: all_done(h, job.id, limit), 2.0 + 1 + 20), (
            h.job(job.id),
            runs_of(h, job.id),
        )
    finally:
        assert survivor.terminate() == 0
    fires = fires_of(events, job.id)
    assert {f.pid for f in fires} == {str(survivor.proc.pid)}  # the killed fires ran again, elsewhere
    assert {f.occurrence for f in fires} == set(range(1, limit + 1)), fires  # at least once each
    # no occurrence was handed over twice, and the job kept its schedule
    runs = runs_of(h, job.id)
    assert Counter(r.occurrence for r in runs) == Counter(range(1, limit + 1)), runs
    step = timedelta(milliseconds=ALLOW_EVERY_MS)
    first = runs[0].scheduled_for
    assert all((r.scheduled_for - first) % step == timedelta(0) for r in runs), runs
    assert [r.scheduled_for for r in runs] == sorted({r.scheduled_for for r in runs})
    parent = h.job(job.id)
    assert parent.status is JobStatus.COMPLETED and parent.occurrence_count == limit
    assert {
        f.occurrence for f in h.service.history(job.id, limit=100) if f.outcome is FireOutcome.SUCCEEDED
    } == set(range(1, limit + 1))
