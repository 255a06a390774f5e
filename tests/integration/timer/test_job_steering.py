"""A timer's job (topic ``timer.due``) is steered by the timer only: cancelling, rescheduling,
pausing, resuming or triggering it through the ScheduleService (what the dashboard calls) is
refused with JobOwnedByTimer and writes nothing, so a timer never claims a job it does not have;
nor can an app schedule its own jobs on the timer's topic. Hostile ids name no timer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import OneShotSpec
from schedule_sdk.errors import InvalidTopic, JobOwnedByTimer
from schedule_sdk.timer import TIMER_TOPIC, TimerState
from tests.support.timer_fixtures import command


@pytest.mark.parametrize("action", ["cancel", "pause", "resume", "trigger", "reschedule"])
def test_steering_a_timers_job_directly_is_refused_and_writes_nothing(make_timer, action):
    timer = make_timer()
    timer.schedule(command(ms=3_600_000))
    service = timer.container.core.schedule_service()
    (job,) = service.list(topic=TIMER_TOPIC).items
    args: tuple[object, ...] = (job.id,)
    if action == "reschedule":
        args += (OneShotSpec(topic="app.other", run_at=job.run_at + timedelta(hours=1), timezone="UTC"),)
    with pytest.raises(JobOwnedByTimer) as refused:
        getattr(service, action)(*args)
    assert refused.value.code == "SCHEDULE_JOB_OWNED_BY_TIMER" and refused.value.http_status == 409
    assert service.get_by_id(job.id) == job  # unchanged
    assert [j.id for j in service.list(limit=10).items] == [job.id]
    entry = timer.queries.get("tenant-a", "sc-1")
    assert entry is not None and entry.state is TimerState.SCHEDULED


def test_an_app_cannot_schedule_on_the_timers_topic(make_timer):
    service = make_timer().container.core.schedule_service()
    run_at = datetime.now(UTC) + timedelta(hours=1)
    with pytest.raises(InvalidTopic):
        service.schedule_at(OneShotSpec(topic=TIMER_TOPIC, run_at=run_at, timezone="UTC"))
    assert service.list().items == []


@pytest.mark.parametrize("bad", ["\x00", "a\ud800", "\udfff"])
def test_an_id_holding_unstorable_text_names_no_timer(make_timer, bad):
    timer = make_timer()
    timer.schedule(command(ms=3_600_000))
    assert timer.queries.get(bad, "sc-1") is None and timer.queries.get("tenant-a", bad) is None
    assert (
        timer.queries.by_correlation(bad, "c") == [] and timer.queries.by_correlation("tenant-a", bad) == []
    )
