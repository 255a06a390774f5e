"""A process killed (SIGKILL) at each point between two steps of an rq hand-off: the job still fires,
once, in a new worker, on SQLite and on PostgreSQL, without waiting for a periodic reconcile
(``reconcile_interval`` is 300 s here, its default on rq; the wait gives up long before that).

How soon it fires (within ``lease + 2`` seconds of the new worker's start) is a figure, measured
by ``bench/crash_points.py``; this test asserts the behaviour only.

The kill is placed by tests/procs/crash.py; the new worker is a plain tests/procs/worker.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from schedule_sdk import Backoff, IntervalRepeat, JobStatus, OneShotSpec, RepeatSpec, RetryPolicy
from schedule_sdk.ports import Occurrence
from schedule_sdk.substrates.rq.plumbing import Keys
from tests.support.rq_fixtures import ROOT, env_of, read_events, spawn_worker
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.redis, pytest.mark.slow]

LEASE = 4.0
#: The periodic reconcile's interval on rq (its default): a fire that came from it came too late.
RECONCILE_INTERVAL = 300.0
#: How long a new worker may take to fire the job: a guard against a hang, far below the interval.
HANG = RECONCILE_INTERVAL / 3
#: Seconds from each new worker's spawn to the wanted fire, appended as the tests run (read by
#: bench/crash_points.py; no test asserts them).
RECOVERIES: list[float] = []


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def settings(request, rq_settings, database_url_factory) -> dict[str, Any]:
    return {**rq_settings, "database_url": database_url_factory(request.param), "lease_seconds": LEASE}


def due(seconds: float, **extra: Any) -> OneShotSpec:
    return OneShotSpec(
        topic="crash.points", run_at=datetime.now(UTC) + timedelta(seconds=seconds), timezone="UTC", **extra
    )


def launch(settings: dict[str, Any], events: Path, **extra: str) -> subprocess.Popen[str]:
    """tests/procs/worker.py set to die at a crash point (it may die before it is ready)."""
    env = env_of(settings, SDK_TEST_EVENTS=str(events), **extra)
    command = [sys.executable, "-m", "tests.procs.worker"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, text=True)


def killed(process: subprocess.Popen[str], timeout: float = HANG) -> None:
    """Wait until ``process`` killed itself at its crash point."""
    try:
        assert process.wait(timeout=timeout) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout is not None:
        process.stdout.close()


def zset(settings: dict[str, Any], name: str) -> list[str]:
    r = redis.Redis.from_url(settings["redis_url"])
    return [m.decode() for m in r.zrange(getattr(Keys(settings["rq_queue"]), name), 0, -1)]


def fires_in_a_new_worker(settings: dict[str, Any], events: Path, wanted: tuple[str, int, int]) -> int:
    """Start a new worker; assert ``wanted`` (job id, occurrence, attempt) fires in it, with no
    periodic reconcile before it; return its pid."""
    assert settings.get("reconcile_interval", RECONCILE_INTERVAL) == RECONCILE_INTERVAL
    log = events.with_name("survivor.log")
    spawned = time.monotonic()
    survivor = spawn_worker(settings, events, log=log)
    try:
        fired = wait_until(lambda: wanted in [e[:3] for e in read_events(events)], timeout=HANG)
        assert fired, (
            f"{wanted} did not fire within {HANG} s of the new worker's start ({read_events(events)});"
            f" its log:\n{log.read_text(errors='replace')[-6000:]}"
        )
        RECOVERIES.append(time.monotonic() - spawned)
        return survivor.pid
    finally:
        stop(survivor)


def test_killed_after_the_consumer_took_the_fire_and_before_the_claim(settings, harnesses, tmp_path):
    events = tmp_path / "events"
    service = harnesses(settings).service
    victim = launch(settings, events, SDK_TEST_CRASH_AT="claim")
    job = service.schedule_at(due(0.3))
    killed(victim)
    key = Occurrence.of(job).key
    assert service.get_by_id(job.id).status is JobStatus.PENDING  # never claimed
    assert key in zset(settings, "released") and zset(settings, "delay") == []  # taken out of RQ
    pid = fires_in_a_new_worker(settings, events, (job.id, 1, 1))
    assert [e[3] for e in read_events(events)] == [pid]


def test_app_killed_after_the_scheduling_commit_and_before_committed(settings, harnesses, tmp_path):
    events = tmp_path / "events"
    command = [sys.executable, "-m", "tests.procs.schedule"]
    app = subprocess.Popen(command, cwd=ROOT, env=env_of(settings, SDK_TEST_CRASH_AT="schedule"), text=True)
    killed(app)
    [job] = harnesses(settings).service.list(limit=10).items  # committed: schedule_at's row exists
    assert zset(settings, "staged") == [Occurrence.of(job).key] and zset(settings, "delay") == []
    fires_in_a_new_worker(settings, events, (job.id, 1, 1))


def test_worker_killed_after_recording_an_interval_s_next_occurrence(settings, harnesses, tmp_path):
    events = tmp_path / "events"
    service = harnesses(settings).service
    victim = launch(settings, events, SDK_TEST_CRASH_AT="record")
    job = service.schedule_repeat(
        RepeatSpec(topic="crash.points", timezone="UTC", repeat=IntervalRepeat(every_ms=1000))
    )
    killed(victim)
    row = service.get_by_id(job.id)
    assert (row.status, row.occurrence) == (JobStatus.PENDING, 2)  # the next occurrence committed
    assert zset(settings, "staged") == [Occurrence.of(row).key]
    fires_in_a_new_worker(settings, events, (job.id, 2, 1))


def test_worker_killed_after_recording_a_retry(settings, harnesses, tmp_path):
    events = tmp_path / "events"
    service = harnesses(settings).service
    victim = launch(settings, events, SDK_TEST_CRASH_AT="record", SDK_TEST_FAIL_ATTEMPTS="1")
    retry = RetryPolicy(attempts=2, backoff=Backoff(type="fixed", delay_ms=200))
    job = service.schedule_at(due(0.3, retry=retry))
    killed(victim)
    row = service.get_by_id(job.id)
    assert (row.status, row.attempt) == (JobStatus.PENDING, 2)  # the retry committed
    assert zset(settings, "staged") == [Occurrence.of(row).key]
    fires_in_a_new_worker(settings, events, (job.id, 1, 2))


def test_worker_killed_after_releasing_expired_claims(settings, harnesses, tmp_path):
    events = tmp_path / "events"
    service = harnesses(settings).service
    slow = spawn_worker(settings, events, SDK_TEST_SLEEP="60")
    job = service.schedule_at(due(0.3))
    try:
        assert wait_until(lambda: service.get_by_id(job.id).status is JobStatus.ACTIVE)
    finally:
        slow.kill()  # mid-fire: the claim is held until its lease ends
        slow.wait()
    releaser = launch(settings, events, SDK_TEST_CRASH_AT="release")
    killed(releaser)  # its heartbeat released the dead worker's claim, then died before committed()
    assert service.get_by_id(job.id).status is JobStatus.PENDING
    assert zset(settings, "staged") == [Occurrence.of(job).key]
    pid = fires_in_a_new_worker(settings, events, (job.id, 1, 1))
    assert [e[3] for e in read_events(events)] == [pid]
