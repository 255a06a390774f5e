"""Steering on every backend (sqlite/postgres x sql/rq): pause, resume, trigger, pause mid-fire,
misfire policies after a pause, and retention purging from a running worker."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    SCHEDULE_MISSED_EVENT,
    IntervalRepeat,
    JobStatus,
    MisfirePolicy,
    OneShotSpec,
    RepeatSpec,
    ScheduledJob,
)
from tests.support.waiting import before_due, with_lead

#: Steering runs through ScheduleService and AsyncScheduleService alike.
pytestmark = pytest.mark.usefixtures("service_kind")


def at(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def ticking(every_ms: int = 200, **changes: object) -> RepeatSpec:
    values: dict[str, object] = {
        "topic": "tests.steer",
        "timezone": "UTC",
        "repeat": IntervalRepeat(every_ms=every_ms),
    }
    values.update(changes)
    return RepeatSpec(**values)  # type: ignore[arg-type]


def test_a_paused_job_never_fires_until_resumed(backend):
    h = backend.harness().start()

    def paused_before_due(lead: float) -> ScheduledJob:
        job = h.service.schedule_at(OneShotSpec(topic="tests.steer", run_at=at(lead), timezone="UTC"))
        with before_due(job):  # a pause that returned after the due instant may race the fire
            h.service.pause(job.id)
        return job

    job = with_lead(paused_before_due, 0.3)
    h.wait_past(job.run_at)
    h.settle()
    assert h.events_for(job.id) == [] and h.job(job.id).status is JobStatus.PAUSED
    h.service.resume(job.id)
    [event] = h.wait_events(job.id, 1)
    assert event.scheduled_for == job.run_at  # fire_once: the late occurrence fires once
    h.wait_status(job.id, "completed")
    h.settle()
    assert len(h.events_for(job.id)) == 1


@pytest.mark.every_backend
def test_pause_during_a_fire_wins_and_the_occurrence_fires_again_after_resume(backend):
    """The in-flight fire's outcome is not recorded (the guard wants an active row claimed by the
    worker): the job stays paused at that occurrence; after resume it fires again with the same
    dedup key (at least once), then the series goes on."""
    h = backend.harness().start()
    entered, release = threading.Event(), threading.Event()

    def slow(event):
        if event.occurrence == 1 and not release.is_set():
            entered.set()
            release.wait(5)

    h.listen(SCHEDULE_ARRIVED_EVENT, slow)
    job = h.service.schedule_repeat(ticking())
    assert entered.wait(5)
    assert h.job(job.id).status is JobStatus.ACTIVE
    h.service.pause(job.id)
    release.set()
    assert h.wait_for(lambda: h.job(job.id).claimed_by is None)  # the in-flight fire ended
    h.wait_past(datetime.now(UTC) + timedelta(milliseconds=200))  # the next occurrence would be due
    h.settle()
    paused = h.job(job.id)
    assert paused.status is JobStatus.PAUSED and paused.occurrence == 1 and paused.claimed_by is None
    assert len(h.events_for(job.id)) == 1
    h.service.resume(job.id)
    events = h.wait_events(job.id, 3)
    assert [e.dedup_key for e in events[:2]] == [f"{job.id}:1", f"{job.id}:1"]
    assert events[2].occurrence == 2
    h.service.cancel(job.id)


def test_trigger_fires_now_and_a_repeating_job_keeps_its_schedule(backend):
    h = backend.harness().start()
    job = h.service.schedule_repeat(ticking(every_ms=5_000, limit=1))
    triggered = h.service.trigger(job.id)
    assert triggered.regular_due == job.run_at
    [extra] = h.wait_events(job.id, 1)
    assert extra.occurrence == 1 and extra.fired_at < job.run_at  # now, not at the regular due
    pending = h.wait_status(job.id, "pending")
    assert (pending.occurrence, pending.scheduled_for, pending.regular_due) == (2, job.run_at, None)
    events = h.wait_events(job.id, 2)
    assert (events[1].occurrence, events[1].scheduled_for) == (2, job.run_at)
    assert events[1].fired_at >= job.run_at  # never early
    assert h.wait_status(job.id, "completed").occurrence_count == 1


def test_trigger_of_a_one_shot_fires_it_now_and_completes_it(backend):
    h = backend.harness().start()
    job = h.service.schedule_at(OneShotSpec(topic="tests.steer", run_at=at(3600), timezone="UTC"))
    h.settle()  # the worker now sleeps toward the job due in an hour
    h.service.trigger(job.id)
    [event] = h.wait_events(job.id, 1)
    assert event.fired_at < job.run_at - timedelta(minutes=30)  # now, not when it was due
    h.wait_status(job.id, "completed")


def test_skip_after_a_pause_reports_the_missed_occurrences(backend):
    h = backend.harness().start()
    missed: list[Any] = []
    h.listen(SCHEDULE_MISSED_EVENT, missed.append)
    job = h.service.schedule_repeat(ticking(every_ms=200, misfire=MisfirePolicy(mode="skip", grace_ms=100)))
    h.wait_events(job.id, 1)
    h.service.pause(job.id)
    paused_at = datetime.now(UTC)
    h.wait_past(paused_at + timedelta(milliseconds=5 * 200))  # five occurrences fall due while paused
    resuming = datetime.now(UTC)
    h.service.resume(job.id)
    resumed_at = datetime.now(UTC)

    def while_paused() -> list[Any]:
        # a loaded machine may also miss an occurrence before the pause (later than its grace):
        # that is reported on its own; the one asserted on names the occurrences due while paused
        return [e for e in missed if any(paused_at <= t <= resumed_at for t in e.missed)]

    assert h.wait_for(lambda: len(while_paused()) >= 1), missed
    h.wait_for(lambda: any(e.fired_at > resumed_at for e in h.events_for(job.id)))
    h.service.cancel(job.id)
    event = while_paused()[0]
    assert event.scheduled_job_id == job.id and event.policy == "skip" and event.count >= 3, missed
    late = [e for e in h.events_for(job.id) if e.fired_at > resumed_at]
    assert all(e.scheduled_for > paused_at for e in late)
    # what came due while paused, beyond the grace, was skipped: nothing fired after the resume
    # is older than the resume less the grace
    assert all(e.scheduled_for >= resuming - timedelta(milliseconds=100) for e in late), late


def test_a_worker_with_retention_purges_old_finished_jobs_only(backend):
    h = backend.harness(retention="1s")
    # before the start: a tick that finds nothing to purge rests for the interval (60 s by default)
    h.container.purger()._interval = 0.1
    h.start()
    done = h.schedule_soon(
        lambda lead: OneShotSpec(topic="tests.steer", run_at=at(lead), timezone="UTC"), 0.5
    )
    cancelled = h.service.schedule_at(OneShotSpec(topic="tests.steer", run_at=at(3600), timezone="UTC"))
    paused = h.service.schedule_at(OneShotSpec(topic="tests.steer", run_at=at(3600), timezone="UTC"))
    pending = h.service.schedule_at(OneShotSpec(topic="tests.steer", run_at=at(3600), timezone="UTC"))
    h.service.cancel(cancelled.id)
    h.service.pause(paused.id)
    h.wait_status(done.id, "completed")
    assert h.wait_for(lambda: h.service.get_by_id(done.id) is None, timeout=10)
    assert h.wait_for(lambda: h.service.get_by_id(cancelled.id) is None, timeout=10)
    assert h.job(paused.id).status is JobStatus.PAUSED and h.job(pending.id).status is JobStatus.PENDING
