"""A cancel, a pause or a reschedule that returned before an occurrence's due instant means no
listener runs for it, on every backend, though a worker claims a row ahead of its due instant and
holds it until then: hundreds of one-shots, each steered in the last 10 ms before it is due.

Every instant is read from the store's clock as the worker's process knows it
(:class:`~schedule_sdk.core.store_time.StoreTime`): a steering call counts as returned before the
due instant when the latest the store's clock can have read at its return (the estimate plus its
error) is before the ``run_at``. Calls that returned later are left out of the judgment.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from datetime import datetime, timedelta

import pytest

from schedule_sdk import JobStatus, OneShotSpec, ScheduledJob
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


@pytest.mark.every_backend
@pytest.mark.parametrize("action", ["cancel", "pause", "reschedule"])
def test_a_steering_call_that_returned_before_the_due_instant_stops_its_fire(backend, action):
    h = backend.harness().start()
    service = h.service
    clock = h.container.store_time()
    assert clock.claim_now() is not None  # the offset is measured
    first = clock.now() + timedelta(seconds=2)
    specs = [
        OneShotSpec(topic=TOPIC, run_at=first + i * SPACING, timezone="UTC", payload={"i": i})
        for i in range(JOBS)
    ]
    jobs = service.schedule_many(specs)
    returned: dict[str, datetime] = {}
    refused: list[str] = []  # the job had finished (fired) already: only after due is that right

    def steer_each(share: list[ScheduledJob], seed: int) -> None:
        rng = random.Random(seed)
        took = [timedelta(0)]  # how long this thread's calls took: each is aimed to return in the window
        for job in share:
            aim = job.run_at - timedelta(milliseconds=rng.uniform(*WINDOW_MS)) - statistics.median(took[-20:])
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
    assert len(returned) == JOBS
    before = [job for job in jobs if returned[job.id] < job.run_at]
    assert not [job for job in before if job.id in refused]
    # most calls returned inside the window (a loaded machine pushes some past the due instant)
    assert len(before) >= JOBS // 4, f"only {len(before)} of {JOBS} calls returned before due"
    h.wait_past(jobs[-1].run_at)
    h.settle()
    fired = [job.id for job in before if h.events_for(job.id)]
    assert fired == [], f"{len(fired)} of {len(before)} jobs steered ({action}) before due fired"
    expected = JobStatus.PAUSED if action == "pause" else JobStatus.CANCELLED
    assert all(h.job(job.id).status is expected for job in before)


def steer(service, action: str, job: ScheduledJob) -> None:
    if action == "cancel":
        service.cancel(job.id)
    elif action == "pause":
        service.pause(job.id)
    else:  # the replacement is due long after the test
        later = OneShotSpec(topic=TOPIC, run_at=job.run_at + timedelta(hours=1), timezone="UTC")
        service.reschedule(job.id, later)
