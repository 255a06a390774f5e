"""Concurrency keys with real worker processes on every backend combination: never more fires of
a key at once than its limit (measured from the listeners' own enter and exit times), none lost,
waiting fires start when a slot frees (not at the next poll), and a worker killed while holding
slots gives them back within the dead-worker window."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from schedule_sdk import ConcurrencyLimit, JobStatus, OneShotSpec
from tests.processes.test_sql_processes import WorkerProcess, fired
from tests.support.waiting import wait_until

#: Far longer than any of these tests' waits (HANG): a waiting fire that started only at a poll
#: would make them time out.
POLL = 300.0


def keyed(seconds: float, limit: int = 2) -> OneShotSpec:
    return OneShotSpec(
        topic="keyed.job",
        run_at=datetime.now(UTC) + timedelta(seconds=seconds),
        timezone="UTC",
        concurrency=ConcurrencyLimit(key="reports", limit=limit),
    )


def spans(events: Path) -> dict[str, list[tuple[float, float]]]:
    """Each job's (enter, exit) times as its listeners wrote them ($SDK_TEST_TIMES: a listener
    writes its line when it ends, so a killed one has none)."""
    found: dict[str, list[tuple[float, float]]] = {}
    for line in events.read_text().splitlines():
        job_id, _occurrence, _attempt, _pid, entered, exited, _due = line.split()
        found.setdefault(job_id, []).append((float(entered), float(exited)))
    return found


def most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an exit at the instant of an enter closes first)."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    running = top = 0
    for _, step in edges:
        running += step
        top = max(top, running)
    return top


@pytest.mark.slow
def test_three_worker_processes_never_run_more_than_the_keys_limit(backend, tmp_path, monkeypatch):
    events = tmp_path / "events.log"
    monkeypatch.setenv("SDK_TEST_TIMES", "1")
    settings = {"poll_interval": POLL, "worker_concurrency": 4}
    workers = [WorkerProcess(backend, events, listener_sleep=0.05, **settings) for _ in range(3)]
    h = backend.harness(poll_interval=POLL)
    try:
        started = time.monotonic()
        jobs = [h.service.schedule_at(keyed(1.0 + (i % 10) * 0.01)).id for i in range(50)]
        # 50 fires of 50 ms, two at a time, is about 1.3 s of listeners: well before any poll
        assert wait_until(lambda: len(fired(events)) >= len(jobs)), len(fired(events))
        took = time.monotonic() - started
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs))
    finally:
        codes = [w.terminate() for w in workers]
    assert codes == [0, 0, 0]
    assert took < POLL / 2, took
    counts = fired(events)
    assert sorted(counts) == sorted(jobs) and set(counts.values()) == {1}, counts.most_common(3)
    found = spans(events)
    intervals = [span for job_id in jobs for span in found[job_id]]
    assert len(intervals) == len(jobs)
    assert most_at_once(intervals) == 2  # never more, and the limit was used
    # Which process fires what is not promised: on SQLite the process whose fire frees a slot
    # often claims the next waiting one before the others hear of the commit.


@pytest.mark.slow
def test_a_worker_killed_holding_slots_gives_them_back_within_the_dead_worker_window(
    backend, tmp_path, monkeypatch
):
    events = tmp_path / "events.log"
    monkeypatch.setenv("SDK_TEST_TIMES", "1")
    dead_after = 2.0
    settings = {"poll_interval": POLL, "dead_after": dead_after, "lease_seconds": 2 * POLL}
    h = backend.harness(**settings)
    holder = WorkerProcess(backend, events, listener_sleep=60, **settings)
    jobs = [h.service.schedule_at(keyed(0.3)).id for _ in range(8)]
    assert wait_until(lambda: sum(h.job(j).status is JobStatus.ACTIVE for j in jobs) == 2)
    assert not wait_until(lambda: sum(h.job(j).status is JobStatus.ACTIVE for j in jobs) > 2, 1.0)
    holder.kill()
    killed = time.monotonic()
    survivor = WorkerProcess(backend, events, listener_sleep=0.05, **settings)
    try:
        # the lease (600 s) and the poll (300 s) are far away: only the dead-worker release and the
        # slot hand-over can finish them before the wait gives up (HANG)
        assert wait_until(lambda: all(h.job(j).status is JobStatus.COMPLETED for j in jobs))
        took = time.monotonic() - killed
    finally:
        assert survivor.terminate() == 0
    assert took < POLL / 2
    counts = fired(events)
    assert sorted(counts) == sorted(jobs), counts  # the held ones fired again, none lost
    finished = [span for spans_ in spans(events).values() for span in spans_]
    assert most_at_once(finished) <= 2
