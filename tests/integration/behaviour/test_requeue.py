"""``requeue`` on every backend (sqlite/postgres x sql/rq), through ScheduleService and
AsyncScheduleService: a failed, completed or cancelled one-shot runs again as a new occurrence,
its history kept; refusals are typed and write nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedule_sdk import (
    SCHEDULE_ARRIVED_EVENT,
    FireOutcome,
    JobNotFound,
    JobStatus,
    OneShotSpec,
    RetryPolicy,
)
from schedule_sdk.errors import NotRequeueable

pytestmark = pytest.mark.usefixtures("service_kind")

MISSING = "01900000-0000-7000-8000-00000000dead"


def soon(**changes: object) -> OneShotSpec:
    values: dict[str, object] = {
        "topic": "tests.requeue",
        "timezone": "UTC",
        "run_at": datetime.now(UTC) + timedelta(milliseconds=300),
        "retry": RetryPolicy(attempts=1),
    }
    values.update(changes)
    return OneShotSpec(**values)  # type: ignore[arg-type]


@pytest.mark.every_backend
def test_a_failed_one_shot_runs_again_as_a_new_occurrence_and_keeps_its_history(backend):
    h = backend.harness().start()
    broken = {"yes": True}

    def listener(event):
        if broken["yes"]:
            raise RuntimeError("the bug")

    h.listen(SCHEDULE_ARRIVED_EVENT, listener)
    job = h.service.schedule_at(soon())
    failed = h.wait_status(job.id, "failed")
    assert failed.last_error == "ListenerFailed: RuntimeError: the bug"
    broken["yes"] = False  # the operator fixed the bug
    requeued = h.service.requeue(job.id)
    assert (requeued.status, requeued.occurrence, requeued.attempt) == (JobStatus.PENDING, 2, 1)
    first, second = h.wait_events(job.id, 2)
    assert (first.occurrence, second.occurrence) == (1, 2) and first.dedup_key != second.dedup_key
    done = h.wait_status(job.id, "completed")
    assert done.id == job.id and done.payload == job.payload
    newest, oldest = h.service.history(job.id)
    assert [(e.occurrence, e.outcome) for e in (oldest, newest)] == [
        (1, FireOutcome.FAILED),
        (2, FireOutcome.SUCCEEDED),
    ]


def test_completed_and_cancelled_one_shots_run_again(backend):
    h = backend.harness().start()
    completed = h.service.schedule_at(soon())
    h.wait_status(completed.id, "completed")
    cancelled = h.service.schedule_at(soon(run_at=datetime.now(UTC) + timedelta(hours=1)))
    h.service.cancel(cancelled.id)
    for job in (completed, cancelled):
        h.service.requeue(job.id)
    assert h.wait_events(completed.id, 2)[-1].occurrence == 2
    assert h.wait_events(cancelled.id, 1)[-1].occurrence == 2
    for job in (completed, cancelled):
        assert h.wait_status(job.id, "completed").occurrence == 2


def test_requeue_refuses_open_unknown_and_replaced_jobs_and_writes_nothing(backend):
    h = backend.harness().start()
    later = datetime.now(UTC) + timedelta(hours=1)
    pending = h.service.schedule_at(soon(run_at=later))
    old = h.service.schedule_at(soon(run_at=later))
    h.service.reschedule(old.id, soon(run_at=later + timedelta(hours=1)))
    replaced = h.job(old.id)
    paused = h.service.pause(h.service.schedule_at(soon(run_at=later)).id)
    for job, reason in ((pending, "it is pending"), (paused, "it is paused"), (replaced, "replaced by job")):
        with pytest.raises(NotRequeueable) as refused:
            h.service.requeue(job.id)
        assert refused.value.code == "SCHEDULE_NOT_REQUEUEABLE" and reason in refused.value.message
        assert h.job(job.id) == job  # nothing written
    with pytest.raises(JobNotFound):
        h.service.requeue(MISSING)
