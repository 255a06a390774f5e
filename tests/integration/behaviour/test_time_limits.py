"""Time limits on every store x substrate, through ScheduleService and AsyncScheduleService:
validated at scheduling (a typed error, nothing written), stored, listed, returned by
``get_by_id``, changed by ``reschedule``; and, through the real fire path of an in-process
worker, a repeating job whose listener overruns moves on to its next occurrence, counted."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    FireOutcome,
    IntervalRepeat,
    InvalidTimeLimit,
    OneShotSpec,
    RepeatSpec,
    schedule_arrived_event_name,
)

pytestmark = pytest.mark.usefixtures("service_kind")


def one_shot(**fields: object) -> OneShotSpec:
    run_at = datetime.now(UTC) + timedelta(hours=1)
    return OneShotSpec(topic="limits.api", run_at=run_at, timezone="UTC", **fields)  # type: ignore[arg-type]


def test_a_time_limit_is_stored_listed_and_changed_by_reschedule(backend):
    h = backend.harness()
    job = h.service.schedule_at(one_shot(time_limit=timedelta(seconds=90, microseconds=900)))
    assert job.time_limit == timedelta(seconds=90)  # kept in whole milliseconds
    assert h.service.get_by_id(job.id).time_limit == timedelta(seconds=90)
    repeating = h.service.schedule_repeat(
        RepeatSpec(
            topic="limits.api",
            timezone="UTC",
            repeat=IntervalRepeat(every_ms=60_000),
            time_limit=timedelta(milliseconds=1),
        )
    )
    plain = h.service.schedule_at(one_shot())
    listed = {j.id: j.time_limit for j in h.service.list(topic="limits.api").items}
    assert listed == {job.id: timedelta(seconds=90), repeating.id: timedelta(milliseconds=1), plain.id: None}
    moved = h.service.reschedule(job.id, one_shot(time_limit=timedelta(days=7)))
    assert h.service.get_by_id(moved.id).time_limit == timedelta(days=7)
    cleared = h.service.reschedule(moved.id, one_shot())
    assert h.service.get_by_id(cleared.id).time_limit is None


@pytest.mark.parametrize(
    "limit",
    [
        timedelta(0),
        timedelta(microseconds=999),
        -timedelta(seconds=1),
        timedelta(days=7, milliseconds=1),
        30,
        1.5,
    ],
)
def test_an_invalid_time_limit_is_refused_and_nothing_is_written(backend, limit):
    h = backend.harness()
    with pytest.raises(InvalidTimeLimit) as refused:
        h.service.schedule_at(one_shot(time_limit=limit))
    assert refused.value.code == "SCHEDULE_INVALID_TIME_LIMIT"
    with pytest.raises(InvalidTimeLimit):
        RepeatSpec(topic="limits.api", timezone="UTC", repeat=IntervalRepeat(every_ms=1000), time_limit=limit)
    assert h.service.list().items == []


@pytest.mark.every_backend
def test_a_repeating_jobs_overrun_is_a_timeout_and_the_series_moves_on(backend):
    h = backend.harness(metrics="memory").start()
    release = threading.Event()
    calls: list[int] = []

    def slow_first(event) -> None:
        calls.append(event.occurrence)
        if event.occurrence == 1:
            release.wait(30)  # stuck until the test lets it go

    h.listen(schedule_arrived_event_name("limits.series"), slow_first)
    try:
        job = h.service.schedule_repeat(
            RepeatSpec(
                topic="limits.series",
                timezone="UTC",
                repeat=IntervalRepeat(every_ms=400),
                time_limit=timedelta(milliseconds=200),
            )
        )
        assert h.wait_for(lambda: h.job(job.id).occurrence >= 3)  # later occurrences fire meanwhile
        history = {f.occurrence: f for f in h.service.history(job.id)}
        assert history[1].outcome is FireOutcome.TIMEOUT and history[1].failed
        assert history[2].outcome is FireOutcome.SUCCEEDED
        assert "time limit of 200 ms" in (history[1].error or "")
        assert h.worker.dispatcher.stuck() == 1
        metrics = h.container.metrics()
        assert metrics.count("schedule.jobs.timed_out", topic="limits.series") == 1
        assert metrics.count("schedule.jobs.fired", topic="limits.series", outcome="failed") == 1
        assert metrics.count("schedule.listeners.stuck") == 1
    finally:
        release.set()
    assert h.wait_for(lambda: h.worker.dispatcher.stuck() == 0)
    assert h.container.metrics().count("schedule.listeners.unstuck") == 1
    assert h.service.history(job.id)[-1].outcome is FireOutcome.TIMEOUT  # the late return changed nothing
