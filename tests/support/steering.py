"""Steering one-shots (cancel, pause, reschedule) in the last 10 ms before they are due, judged
by the store's clock as the steering process knows it
(:class:`~schedule_sdk.core.store_time.StoreTime`): a call counts as returned before the due
instant when the latest the store's clock can have read at its return (the estimate plus its
error) is before the ``run_at``."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from schedule_sdk import OneShotSpec, ScheduledJob
from schedule_sdk.core.claim_timing import CLAIM_AHEAD, EXTRA_LEAD
from schedule_sdk.core.store_time import StoreTime
from schedule_sdk.errors import JobFinished, NotReschedulable
from tests.support.waiting import HANG

#: One-shots per batch, due ``SPACING`` apart, each steered up to ``WINDOW_MS`` before it is due
#: by one of ``STEERERS`` threads; a thread leaves out a job it can no longer aim in time (it
#: fires, and is not judged), so a slow call does not make every later one late.
JOBS = 200
SPACING = timedelta(milliseconds=10)
STEERERS = 5
WINDOW_MS = (0.0, 10.0)
#: Calls that returned this close before the due instant may have found the job claimed ahead
#: already: batches follow one another until ``ENOUGH`` such calls were made (a loaded machine
#: makes fewer per batch), within ``HANG``.
CLOSE = CLAIM_AHEAD + EXTRA_LEAD
ENOUGH = 30
TOPIC = "tests.steered"


def store_latest(clock: StoreTime) -> datetime:
    """The latest instant the store's clock can read now (its estimate plus the error)."""
    reading = clock.reading
    return clock.now() + timedelta(seconds=0.0 if reading is None else reading.error)


def wait_for_store(clock: StoreTime, instant: datetime) -> None:
    """Sleep until the store's clock, as estimated, reads ``instant`` (this only aims the call)."""
    while (left := (instant - clock.now()).total_seconds()) > 0:
        time.sleep(left)


def due_one_shots(service: Any, clock: StoreTime) -> list[ScheduledJob]:
    """``JOBS`` one-shots of ``TOPIC``, the first due 2 s from now, ``SPACING`` apart."""
    first = clock.now() + timedelta(seconds=2)
    specs = [
        OneShotSpec(topic=TOPIC, run_at=first + i * SPACING, timezone="UTC", payload={"i": i})
        for i in range(JOBS)
    ]
    jobs: list[ScheduledJob] = service.schedule_many(specs)
    return jobs


@dataclass
class Steered:
    """What :func:`steer_before_due` did: every job it scheduled, those whose steering call
    returned before their due instant (to judge), and how many of those returned within
    ``CLOSE`` of it."""

    jobs: list[ScheduledJob] = field(default_factory=list)
    before: list[ScheduledJob] = field(default_factory=list)
    close: int = 0


def steer_before_due(service: Any, clock: StoreTime, action: str) -> Steered:
    """Batches of :func:`due_one_shots`, every job steered (``action``: cancel, pause or
    reschedule) so its call returns in the last ``WINDOW_MS`` before its due instant, until
    ``ENOUGH`` calls returned within ``CLOSE`` before it. A call refused because the job had
    finished (it fired) must have returned after the due instant (asserted)."""
    steered = Steered()
    deadline = time.monotonic() + HANG
    while steered.close < ENOUGH and time.monotonic() < deadline:
        jobs = due_one_shots(service, clock)
        steered.jobs += jobs
        returned = _steer_batch(service, clock, action, jobs)
        before = [job for job in jobs if job.id in returned and returned[job.id] < job.run_at]
        steered.before += before
        steered.close += sum(1 for job in before if job.run_at - returned[job.id] <= CLOSE)
    assert steered.close >= ENOUGH, f"only {steered.close} calls returned within {CLOSE} before due"
    return steered


def _steer_batch(
    service: Any, clock: StoreTime, action: str, jobs: list[ScheduledJob]
) -> dict[str, datetime]:
    """Steer ``jobs`` from ``STEERERS`` threads; when each steered call returned (the latest the
    store's clock can have read then)."""
    returned: dict[str, datetime] = {}
    refused: list[str] = []

    def steer_each(share: list[ScheduledJob], seed: int) -> None:
        rng = random.Random(seed)
        took = [timedelta(0)]  # how long this thread's calls took: each is aimed to return in the window
        for job in share:
            recent = sorted(took[-20:])
            late = recent[len(recent) * 4 // 5]  # most calls take no longer: they return in the window
            aim = job.run_at - timedelta(milliseconds=rng.uniform(*WINDOW_MS)) - late
            if clock.now() > aim:
                continue  # too late to aim: it fires, unjudged
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
    assert not any(thread.is_alive() for thread in threads)
    early = [job.id for job in jobs if job.id in refused and returned[job.id] < job.run_at]
    assert not early, "a job finished before its due instant"
    return returned


def steer(service: Any, action: str, job: ScheduledJob) -> None:
    if action == "cancel":
        service.cancel(job.id)
    elif action == "pause":
        service.pause(job.id)
    else:  # the replacement is due long after the test
        later = OneShotSpec(topic=TOPIC, run_at=job.run_at + timedelta(hours=1), timezone="UTC")
        service.reschedule(job.id, later)
