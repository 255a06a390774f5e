"""Steering one-shots (cancel, pause, reschedule) in the last 10 ms before they are due, judged
by the store's clock as the steering process knows it
(:class:`~schedule_sdk.core.store_time.StoreTime`): a call counts as returned before the due
instant when the latest the store's clock can have read at its return (the estimate plus its
error) is before the ``run_at``."""

from __future__ import annotations

import random
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from schedule_sdk import OneShotSpec, ScheduledJob
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.errors import JobFinished, NotReschedulable
from tests.support.waiting import HANG

#: One-shots per test, due ``SPACING`` apart, each steered up to ``WINDOW_MS`` before it is due
#: by one of ``STEERERS`` threads (a call can take longer than the spacing on a loaded machine).
JOBS = 200
SPACING = timedelta(milliseconds=10)
STEERERS = 5
WINDOW_MS = (0.0, 10.0)
TOPIC = "tests.steered"


def store_latest(clock: StoreTime) -> datetime:
    """The latest instant the store's clock can read now (its estimate plus the error)."""
    reading = clock.reading
    return clock.now() + timedelta(seconds=0.0 if reading is None else reading.error)


def wait_for_store(clock: StoreTime, instant: datetime) -> None:
    """Sleep until the store's clock, as estimated, reads ``instant`` (this only aims the call)."""
    while (left := (instant - clock.now()).total_seconds()) > 0:
        time.sleep(left)


def due_one_shots(service: Any, clock: StoreTime, count: int = JOBS) -> list[ScheduledJob]:
    """``count`` one-shots of ``TOPIC``, the first due 2 s from now, ``SPACING`` apart."""
    first = clock.now() + timedelta(seconds=2)
    specs = [
        OneShotSpec(topic=TOPIC, run_at=first + i * SPACING, timezone="UTC", payload={"i": i})
        for i in range(count)
    ]
    jobs: list[ScheduledJob] = service.schedule_many(specs)
    return jobs


def steer_before_due(
    service: Any, clock: StoreTime, action: str, jobs: list[ScheduledJob]
) -> list[ScheduledJob]:
    """Steer every job (``action``: cancel, pause or reschedule) so the call returns in the last
    ``WINDOW_MS`` before its due instant, from ``STEERERS`` threads; the jobs whose call returned
    before their due instant. A call refused because the job had finished (it fired) must have
    returned after the due instant (asserted)."""
    returned: dict[str, datetime] = {}
    refused: list[str] = []

    def steer_each(share: list[ScheduledJob], seed: int) -> None:
        rng = random.Random(seed)
        took = [timedelta(0)]  # how long this thread's calls took: each is aimed to return in the window
        for job in share:
            recent = sorted(took[-20:])
            late = recent[len(recent) * 4 // 5]  # most calls take no longer: they return in the window
            aim = job.run_at - timedelta(milliseconds=rng.uniform(*WINDOW_MS)) - late
            wait_for_store(clock, aim)
            started = clock.now()
            try:
                steer(service, action, job)
            except (JobFinished, NotReschedulable):
                refused.append(job.id)
            returned[job.id] = store_latest(clock)
            took.append(clock.now() - started)

    threads = [
        threading.Thread(target=steer_each, args=(jobs[k::STEERERS], k), daemon=True) for k in range(STEERERS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG)
    assert len(returned) == len(jobs)
    before = [job for job in jobs if returned[job.id] < job.run_at]
    assert not [job.id for job in before if job.id in refused], "a job finished before its due instant"
    # most calls returned inside the window (a loaded machine pushes some past the due instant)
    assert len(before) >= len(jobs) // 5, f"only {len(before)} of {len(jobs)} calls returned before due"
    return before


def steer(service: Any, action: str, job: ScheduledJob) -> None:
    if action == "cancel":
        service.cancel(job.id)
    elif action == "pause":
        service.pause(job.id)
    else:  # the replacement is due long after the test
        later = OneShotSpec(topic=TOPIC, run_at=job.run_at + timedelta(hours=1), timezone="UTC")
        service.reschedule(job.id, later)
