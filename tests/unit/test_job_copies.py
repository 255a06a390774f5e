"""``ScheduledJob.evolve`` copies a job slot by slot: it must equal ``dataclasses.replace`` for
any change of any field, leave the original alone, and refuse a name that is not a field."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import OneShotSpec
from schedule_sdk.domain.jobs import ScheduledJob
from schedule_sdk.domain.status import JobStatus

NOW = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)


def _job() -> ScheduledJob:
    spec = OneShotSpec(topic="t", run_at=NOW + timedelta(minutes=5), timezone="UTC", payload={"a": [1]})
    return ScheduledJob.first_of(spec, "job-1", NOW)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(ScheduledJob)])
def test_a_change_of_any_field_equals_dataclasses_replace(name):
    job = _job()
    marker = object()  # a value no field holds, so a copy that dropped the change shows
    copy = job.evolve(**{name: marker})
    assert copy == dataclasses.replace(job, **{name: marker})
    assert getattr(copy, name) is marker
    assert getattr(job, name) is not marker


def test_several_changes_and_none():
    job = _job()
    changed = job.evolve(status=JobStatus.ACTIVE, claimed_by="w1", attempt=2)
    assert changed == dataclasses.replace(job, status=JobStatus.ACTIVE, claimed_by="w1", attempt=2)
    assert job.evolve() == job and job.evolve() is not job
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.status = JobStatus.PENDING  # type: ignore[misc]


def test_a_name_that_is_not_a_field_is_refused():
    with pytest.raises(TypeError, match="no field colour, shade"):
        _job().evolve(shade=1, colour=2)
